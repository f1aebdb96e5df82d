//go:build cuda

package cuda

import (
	"testing"
	"unsafe"

	"github.com/rookscript/rookscript/engine/backend/cuda/kernels"
	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
	"github.com/rookscript/rookscript/engine/internal/paritytest"
)

// counting is the GPU's driver counting its launches and the bytes it copies each way.
type counting struct {
	*driver
	c paritytest.Counts
}

func (d *counting) Launch(k kernels.Kernel, grid, block launch.Dim, shared int, args []launch.Arg) {
	d.c.Launches++
	d.driver.Launch(k, grid, block, shared, args)
}

func (d *counting) LaunchGraph(g launch.Graph) {
	d.c.Graphs++
	d.driver.LaunchGraph(g)
}

func (d *counting) DtoH(dst unsafe.Pointer, src uintptr, bytes int) {
	d.c.ToHost += bytes
	d.driver.DtoH(dst, src, bytes)
}

func (d *counting) HtoD(dst uintptr, src unsafe.Pointer, bytes int) {
	d.c.ToDevice += bytes
	d.driver.HtoD(dst, src, bytes)
}

// TestDecodeStepStructure: a steady decode step of a 12-layer model at 64 rows (8 prompts × 8)
// on this GPU, counted at the driver: one launch of a CUDA graph, 8 bytes a row to the host and
// none to the device. The figures are logged for bench/results/gpu.json (bench/gpu_check.sh
// reads the "gpu.json:" line).
func TestDecodeStepStructure(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	d := &counting{driver: b.Driver().(*driver)}
	cfg := gpt2test.Tiny()
	cfg.NumLayers = 12
	lb := launch.New(d)
	counts := paritytest.DecodeSteps(t, lb, cfg, 8, 8, 4, func() paritytest.Counts {
		c := d.c
		d.c = paritytest.Counts{}
		return c
	})
	steady := counts[len(counts)-2]
	if steady.Launches != 0 || steady.Graphs != 1 || steady.ToHost != 8*64 || steady.ToDevice != 0 {
		t.Errorf("a steady decode step: %+v, want one graph, %d bytes to the host, 0 to the device (graphs: %v)",
			steady, 8*64, lb.GraphError())
	}
	t.Logf("gpu.json: launches_per_decode_step=%d kernels_per_decode_step=%d dtoh_bytes_per_decode_step=%d htod_bytes_per_decode_step=%d",
		steady.Launches+steady.Graphs, paritytest.DecodeStepLaunches(cfg.NumLayers, false), steady.ToHost, steady.ToDevice)
}
