package launch

import (
	"unsafe"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cuda/kernels"
)

// Driver is what the host side needs from a device: memory, kernel launches and SGEMM.
// Device addresses are plain integers; failures are programming or device errors, so a
// driver panics with a message rather than returning them (backend.Backend has no errors).
type Driver interface {
	// Name describes the device ("cuda", "cuda-emu").
	Name() string
	// GridCap is the most blocks to give a launch along x or y. Every kernel loops over its
	// work (grid-stride), so this changes speed, never results: a GPU wants grids large enough
	// to fill it; the emulator, which runs blocks one at a time, a few blocks that loop.
	GridCap() int
	// Alloc returns bytes of device memory, zeroed when zero is set and otherwise with
	// unspecified contents. Free releases it.
	Alloc(bytes int, zero bool) uintptr
	Free(p uintptr)
	// HtoD and DtoH copy between host and device memory; they return when the host side may
	// be reused (HtoD) or holds the data (DtoH), ordered after every earlier launch.
	HtoD(dst uintptr, src unsafe.Pointer, bytes int)
	DtoH(dst unsafe.Pointer, src uintptr, bytes int)
	// Launch runs kernel k over grid × block threads with shared bytes of dynamic shared
	// memory. args holds one value per kernel parameter, in order.
	Launch(k kernels.Kernel, grid, block Dim, shared int, args []Arg)
	// Sgemm is cublasSgemm: column-major C = alpha·op(A)·op(B) + beta·C with op(A) (m, k) and
	// op(B) (k, n); C is not read when beta is 0.
	Sgemm(transA, transB bool, m, n, k int, alpha float32, a uintptr, lda int, b uintptr, ldb int, beta float32, c uintptr, ldc int)
}

// Dim is a launch grid or block shape.
type Dim struct{ X, Y, Z int }

// D1 is a one-dimensional shape.
func D1(x int) Dim { return Dim{x, 1, 1} }

// Arg is one kernel argument: its bits in a 64-bit slot (a pointer, or a 4-byte value in the
// low half, as cuLaunchKernel reads it on a little-endian host) and its kind, a letter of
// kernels.Kernel.Sig.
type Arg struct {
	Bits uint64
	Kind byte
	// Mem is the buffer a pointer argument points into, if any: the backend keeps it
	// reachable until the launch is issued, so that its memory is not freed meanwhile.
	Mem *backend.Mem
}
