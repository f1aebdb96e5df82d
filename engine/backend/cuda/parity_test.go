//go:build cuda

package cuda

import (
	"testing"

	"gorgonia.org/cu"

	"github.com/rookscript/rookscript/engine/backend/cuda/kernels"
	"github.com/rookscript/rookscript/engine/internal/paritytest"
)

// TestParity compares the GPU with the CPU backend: every kernel, determinism, a full
// forward/backward, a GRPO-like step, KV-cache decoding, the rollout sampler with the same seed
// and a real GRPO trainer step (tolerances in paritytest).
func TestParity(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	d := b.Driver().(*driver)
	t.Logf("%s", d.Describe())
	paritytest.Run(t, b)
}

// TestModules: the committed PTX JIT-compiles on this GPU (sm_80 PTX runs on every later
// architecture) and contains every kernel.
func TestModules(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	d := b.Driver().(*driver)
	for _, arch := range []string{"sm_80"} {
		ptx, _ := kernels.Source(arch)
		err := d.run(func() error {
			mod, err := cu.LoadData(ptx)
			if err != nil {
				return err
			}
			for _, k := range kernels.All {
				if _, err := mod.Function(k.Name); err != nil {
					return err
				}
			}
			return mod.Unload()
		})
		if err != nil {
			t.Errorf("%s PTX on %s: %v", arch, d.Device, err)
		}
	}
}
