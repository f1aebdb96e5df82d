package cpu

import (
	"runtime"
	"sync"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/internal/procmem"
)

// CPU is the host backend.
type CPU struct {
	mu    sync.Mutex
	pool  *pool
	limit int64 // bytes the process may use (procmem.Available); 0: unknown

	// Per-kernel job structs (see pool.go), reused call after call.
	ew    ewJob
	enc   encoderJob
	ln    layerNormJob
	att   attentionJob
	dec   decodeJob
	lp    logProbsJob
	adam  adamJob
	sq    sumSquaresJob
	rows  rowsJob
	bgrad biasGradJob
	gm    gemmJob
	ntj   ntJob
	sm    softmaxJob

	partials []float64 // per-chunk reduction results
	lnPart   []float32 // LayerNorm backward per-chunk dw, db
	lpSums   []float64 // LogProbs per-row sums
	fam      []int32   // attention's families of sequences
	decRuns  []int32   // decode attention's chunks (decodeRuns)
	scratch  [][]float32
}

var _ backend.Backend = (*CPU)(nil)

// New returns a CPU backend that runs kernels on threads goroutines (0: GOMAXPROCS).
func New(threads int) *CPU {
	if threads < 1 {
		threads = runtime.GOMAXPROCS(0)
	}
	blasCore.Do(setupKernels)
	// Parallelism is ours: OpenBLAS runs single-threaded inside pool workers (see gemmJob).
	SetBLASThreads(1)
	hasAVX2()                       // detect the processor's vector support once, before workers run kernels
	limit, _ := procmem.Available() // unknown (0) where /proc cannot be read: no check
	return &CPU{pool: newPool(threads), limit: limit}
}

// Name describes the backend.
func (c *CPU) Name() string { return "cpu" }

// Describe names what decides the backend's bits: the engine's own kernels give the same
// ones with AVX-512, AVX2 or neither, so it is OpenBLAS's kernel family, which sums the
// backward's GEMMs in its own order. Two processes that describe themselves alike compute the
// same bits; a checkpoint records it (checkpoint.State.Kernels).
func (c *CPU) Describe() string { return "cpu, OpenBLAS " + BLASCoreName() + " kernels" }

// BatchInvariant is true: every forward kernel's sums run in an order that depends only on
// each output's own inputs (the package documentation), so a row's logprob is the same bits
// in any batch, on any thread count (DESIGN §6.1).
func (c *CPU) BatchInvariant() bool { return true }

// Threads is the number of goroutines kernels run on.
func (c *CPU) Threads() int { return c.pool.workers }

// checkAlloc refuses an allocation larger on its own than the process may ever hold.
func (c *CPU) checkAlloc(n int) {
	if c.limit > 0 && (n < 0 || int64(n) > c.limit/4) {
		panic(&backend.OutOfMemoryError{Device: "cpu", Bytes: uint64(n) * 4, Limit: c.limit})
	}
}

func (c *CPU) Alloc(n int) backend.Buf {
	c.checkAlloc(n)
	return backend.Buf{M: &backend.Mem{Host: HostFloats(n), Len: n}, N: n}
}

func (c *CPU) AllocI32(n int) backend.I32 {
	c.checkAlloc(n)
	return backend.I32{M: &backend.Mem{HostI: backend.TrackHost(make([]int32, n)), Len: n}, N: n}
}

func (c *CPU) Upload(dst backend.Buf, src []float32) {
	if len(src) != dst.N {
		panic("cpu: Upload size mismatch")
	}
	copy(dst.F32(), src)
}

func (c *CPU) Download(dst []float32, src backend.Buf) {
	if len(dst) != src.N {
		panic("cpu: Download size mismatch")
	}
	copy(dst, src.F32())
}

func (c *CPU) UploadI32(dst backend.I32, src []int32) {
	if len(src) != dst.N {
		panic("cpu: UploadI32 size mismatch")
	}
	copy(dst.Ints(), src)
}

// partialsFor returns a zeroed per-chunk reduction area of n float64s.
func (c *CPU) partialsFor(n int) []float64 {
	if cap(c.partials) < n {
		c.partials = make([]float64, n)
	}
	p := c.partials[:n]
	clear(p)
	return p
}

// scratchFor returns per-worker scratch slices of at least n floats each.
func (c *CPU) scratchFor(n int) [][]float32 {
	if len(c.scratch) != c.pool.workers {
		c.scratch = make([][]float32, c.pool.workers)
	}
	for w := range c.scratch {
		if cap(c.scratch[w]) < n {
			c.scratch[w] = make([]float32, n)
		}
		c.scratch[w] = c.scratch[w][:n]
	}
	return c.scratch
}

// growZero returns (*s)[:n] zeroed, growing *s if needed.
func growZero(s *[]float32, n int) []float32 {
	if cap(*s) < n {
		*s = make([]float32, n)
	}
	p := (*s)[:n]
	clear(p)
	return p
}
