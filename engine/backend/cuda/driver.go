//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/rookscript/rookscript/engine/backend/cuda/kernels"
	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
)

// New opens GPU ordinal, loads the kernels and returns the CUDA backend on it.
func New(ordinal int) (*launch.Backend, error) {
	d, err := open(ordinal)
	if err != nil {
		return nil, err
	}
	return launch.New(d), nil
}

// driver implements launch.Driver on one GPU.
type driver struct {
	ctx      cu.CUContext // the device's primary context
	mu       sync.Mutex   // one driver call at a time (run)
	fns      map[string]cu.Function
	blas     *cublasHandle
	syncEach bool

	Device string // the GPU's name
	Major  int    // compute capability
	Arch   string // the PTX target loaded
	CuBLAS string // the cuBLAS library loaded and its version
}

func open(ordinal int) (*driver, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: counting devices: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d requested, %d present", ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	major, err1 := dev.Attribute(cu.ComputeCapabilityMajor)
	minor, err2 := dev.Attribute(cu.ComputeCapabilityMinor)
	name, err3 := dev.Name()
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	ptx, arch, err := kernels.PTX(major, minor)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", name, err)
	}
	ctx, err := primaryContext(dev)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", name, err)
	}
	d := &driver{ctx: ctx, fns: map[string]cu.Function{}, Device: name, Major: major, Arch: arch,
		syncEach: os.Getenv("ROOKSCRIPT_CUDA_SYNC") == "1"}
	err = d.run(func() (err error) {
		mod, err := cu.LoadData(ptx)
		if err != nil {
			return fmt.Errorf("loading the %s kernels (is the driver older than CUDA 11.8?): %w", arch, err)
		}
		for _, k := range kernels.All {
			fn, err := mod.Function(k.Name)
			if err != nil {
				return fmt.Errorf("kernel %s: %w", k.Name, err)
			}
			d.fns[k.Name] = fn
		}
		if d.blas, err = newCuBLAS(); err != nil {
			return err
		}
		d.CuBLAS = fmt.Sprintf("%s (%s)", d.blas.lib.path, d.blas.VersionString())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: %s (%s): %w", name, arch, err)
	}
	return d, nil
}

// primaryContext returns the device's primary context. It is the context the CUDA runtime
// uses, and so NCCL, which selects the device through the runtime (cudaSetDevice): in the same
// context the backend's kernels and NCCL's share the default stream, in launch order — a
// context of the backend's own would have a default stream of its own. The context lives as
// long as the process (it is the runtime's to release).
func primaryContext(dev cu.Device) (cu.CUContext, error) {
	pc, err := dev.RetainPrimaryCtx()
	if err != nil {
		return pc, fmt.Errorf("retaining the primary context: %w", err)
	}
	return pc, nil
}

// run calls f on the calling goroutine's thread with the context current there, one call at
// a time. A context may be current on any number of threads; making it current is a write to
// the driver's thread-local state, and doing it at every call also undoes NCCL's switches
// (NCCL selects the device through the CUDA runtime, which may leave another context current
// on the thread). gorgonia's cu.Ctx instead hands every call to one locked thread over a
// channel, two thread switches and a closure per launch, which cost a train step more heap
// allocations and time (the launches run ahead of the device either way, so a decode step
// hardly depends on it).
func (d *driver) run(f func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return fmt.Errorf("making the context current: %w", err)
	}
	return f()
}

func (d *driver) Name() string { return "cuda" }

// Describe names the GPU, the kernels' target, the driver's CUDA version and the cuBLAS loaded.
func (d *driver) Describe() string {
	v := cu.Version()
	return fmt.Sprintf("%s (compute capability %d.x, %s PTX), driver CUDA %d.%d, cuBLAS %s",
		d.Device, d.Major, d.Arch, v/1000, v%1000/10, d.CuBLAS)
}

// GridCap: the largest y dimension of a grid, and far more blocks along x than a GPU runs
// at once.
func (d *driver) GridCap() int { return 65535 }

// do runs f with the context current (run) and panics with what on failure: backend.Backend
// has no error results, and a failing device call means a bug or a dead device.
func (d *driver) do(what string, f func() error) {
	if err := d.run(f); err != nil {
		panic(fmt.Sprintf("cuda: %s: %v (kernel errors surface at the next synchronising call; "+
			"ROOKSCRIPT_CUDA_SYNC=1 reports them at the failing launch)", what, err))
	}
}

func (d *driver) Alloc(bytes int, zero bool) uintptr {
	var p cu.DevicePtr
	d.do(fmt.Sprintf("allocating %d bytes", bytes), func() (err error) {
		if p, err = cu.MemAlloc(int64(bytes)); err != nil {
			if free, total, e := cu.MemInfo(); e == nil {
				err = fmt.Errorf("%w (%d MiB free of %d MiB)", err, free>>20, total>>20)
			}
			return err
		}
		if zero {
			return cu.MemsetD8(p, 0, int64(bytes))
		}
		return nil
	})
	return uintptr(p)
}

// Free waits for the device first: the memory may be a scratch buffer that kernels still
// queued on the stream use (the backend drops scratch when it grows, and the collector frees
// it whenever it runs).
func (d *driver) Free(p uintptr) {
	d.do("freeing device memory", func() error {
		if err := cu.Synchronize(); err != nil {
			return err
		}
		return cu.MemFree(cu.DevicePtr(p))
	})
}

func (d *driver) HtoD(dst uintptr, src unsafe.Pointer, bytes int) {
	d.do("copying to the device", func() error { return cu.MemcpyHtoD(cu.DevicePtr(dst), src, int64(bytes)) })
}

func (d *driver) DtoH(dst unsafe.Pointer, src uintptr, bytes int) {
	d.do("copying from the device", func() error { return cu.MemcpyDtoH(dst, cu.DevicePtr(src), int64(bytes)) })
}

func (d *driver) Launch(k kernels.Kernel, grid, block launch.Dim, shared int, args []launch.Arg) {
	fn, ok := d.fns[k.Name]
	if !ok {
		panic("cuda: no kernel " + k.Name)
	}
	// cuLaunchKernel takes a pointer to each argument; Function.Launch copies the 8 bytes
	// behind each one into C memory (a 4-byte parameter reads the low half).
	vals := make([]uint64, len(args))
	params := make([]unsafe.Pointer, len(args))
	for i, a := range args {
		vals[i] = a.Bits
		params[i] = unsafe.Pointer(&vals[i])
	}
	d.do("launching "+k.Name, func() error {
		if err := fn.Launch(grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, shared, cu.Stream{}, params); err != nil {
			return err
		}
		if d.syncEach {
			return cu.Synchronize()
		}
		return nil
	})
}

func (d *driver) Sgemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int) {
	d.do("cublasSgemm", func() error {
		if err := d.blas.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); err != nil {
			return err
		}
		if d.syncEach {
			return cu.Synchronize()
		}
		return nil
	})
}
