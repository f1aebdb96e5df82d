package cpu

import "github.com/rookscript/rookscript/engine/backend"

// biasJob broadcasts a bias vector into every row of out.
type biasJob struct {
	out, bias []float32
	oc        int
}

func (j *biasJob) run(_, lo, hi int) {
	for i := lo; i < hi; i++ {
		copy(j.out[i*j.oc:(i+1)*j.oc], j.bias)
	}
}

// biasGradJob adds the column sums of dout to dbias over the columns [lo, hi); every column
// sums its rows in order, so the result does not depend on the thread count.
type biasGradJob struct {
	dbias, dout []float32
	n, oc       int
}

func (j *biasGradJob) run(_, lo, hi int) {
	cColSums(j.dbias[lo:hi], j.dout[lo:], j.n, j.oc)
}

// gemmJob splits one GEMM over the pool: OpenBLAS runs single-threaded inside each worker
// (one set of threads for the whole backend, none spinning while Go kernels run), and the
// output is cut along its larger dimension into one part per worker.
type gemmJob struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    float32
	a, b, c        []float32
	lda, ldb, ldc  int
	splitM         bool
	parts          int
}

// gemmAlign keeps the parts' boundaries on multiples of the SGEMM micro-kernel widths.
const gemmAlign = 16

func (j *gemmJob) run(_, lo, hi int) {
	dim := j.n
	if j.splitM {
		dim = j.m
	}
	size := (dim + j.parts - 1) / j.parts
	size = (size + gemmAlign - 1) / gemmAlign * gemmAlign
	for part := lo; part < hi; part++ {
		s, e := part*size, min(dim, (part+1)*size)
		if s >= e {
			continue
		}
		if j.splitM {
			off := s * j.lda // rows s.. of op(A): rows of A, or columns when transposed
			if j.transA {
				off = s
			}
			a := j.a[off:]
			sgemm(j.transA, j.transB, e-s, j.n, j.k, j.alpha, a, j.lda, j.b, j.ldb, j.beta, j.c[s*j.ldc:], j.ldc)
		} else {
			off := s // columns s.. of op(B): columns of B, or rows when transposed
			if j.transB {
				off = s * j.ldb
			}
			b := j.b[off:]
			sgemm(j.transA, j.transB, j.m, e-s, j.k, j.alpha, j.a, j.lda, b, j.ldb, j.beta, j.c[s:], j.ldc)
		}
	}
}

// gemmMinWork is the size (m·n·k) below which splitting a GEMM costs more than it saves.
const gemmMinWork = 1 << 18

// gemm computes C = alpha·op(A)·op(B) + beta·C on the pool (row-major, as sgemm).
func (c *CPU) gemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, cc []float32, ldc int) {
	parts := c.pool.workers
	if m*n*k < gemmMinWork {
		parts = 1
	}
	c.gm = gemmJob{transA: transA, transB: transB, m: m, n: n, k: k, alpha: alpha, beta: beta,
		a: a, b: b, c: cc, lda: lda, ldb: ldb, ldc: ldc, splitM: m > n, parts: parts}
	c.pool.run(&c.gm, parts, 1)
	c.gm = gemmJob{}
}

// ntJob runs the packing-free kernel of gemm_small.c over column ranges: part p computes the
// output columns [p·size, (p+1)·size), reading only its rows of w.
type ntJob struct {
	out, a, w     []float32
	res, bias     []float32 // nil: none
	gelu          []float32 // not nil: gelu(out) is written here too, a part at a time
	m, n, k       int
	lda, ldw, ldo int
	size          int
}

func (j *ntJob) run(_, lo, hi int) {
	for p := lo; p < hi; p++ {
		j0, j1 := p*j.size, min(j.n, (p+1)*j.size)
		cGemmNT(j.out, j.res, j.a, j.w, j.bias, j.m, j0, j1, j.k, j.lda, j.ldw, j.ldo, false)
		if j.gelu != nil {
			// While the part's output is still in this worker's cache; GELU is elementwise,
			// so the part boundaries change no number.
			cGELURows(j.gelu[j0:], j.out[j0:], j.m, j1-j0, j.ldo)
		}
	}
}

// nt computes out (m, n; row stride ldo) = res + (bias + a·wᵀ) (res and bias nil for none; res
// has out's stride and may be out), a (m, k) and w (n, k) of row strides lda and ldw, and
// with gelu also gelu(out) into gelu (out's stride), on the pool: each part a run of columns
// (whole tiles of the kernel), several parts per worker once there are 4 grains of columns
// per worker, so that a worker slowed by the rest of the machine, or woken late, holds up less.
// With one part per worker, a decode step's two 768-column products ran at 160-176 GFLOP/s
// against 200-233 for the wider ones, and the step took 5% longer. A column's result does not
// depend on the split.
func (c *CPU) nt(out, res, a, w, bias, gelu []float32, m, n, k, lda, ldw, ldo int) {
	parts := c.pool.workers
	if m*n*k < gemmMinWork {
		parts = 1
	} else if n >= 4*ntColumns*parts {
		parts *= 4
	}
	size := (n + parts - 1) / parts
	size = (size + ntColumns - 1) / ntColumns * ntColumns
	c.ntj = ntJob{out: out, res: res, a: a, w: w, bias: bias, gelu: gelu, m: m, n: n, k: k, lda: lda, ldw: ldw, ldo: ldo, size: size}
	c.pool.run(&c.ntj, (n+size-1)/size, 1)
	c.ntj = ntJob{}
}

// useNT says whether MatMul may run gemm_small.c's kernel (AVX-512) rather than OpenBLAS;
// tests switch it to compare the two.
var useNT = hasAVX512()

// ntMaxRows is the most rows for which MatMul takes the packing-free kernel: a decode step's
// products. Above it OpenBLAS's packed panels pay
// for their copy and its kernels run faster (on this project's AVX-512 machine, per core:
// 115 against 105 GFLOP/s at 64 rows, 115 against 150 at 768).
const ntMaxRows = 96

// ntFor says whether a product of n rows runs the packing-free kernel.
func ntFor(n int) bool { return useNT && n <= ntMaxRows }

// ntColumns is the column grain of a MatMul part: whole tiles of the kernel, and few enough
// parts per worker that each streams a long run of weight rows.
const ntColumns = 64

func (c *CPU) MatMul(out, inp, w, bias backend.Buf, n, ch, oc int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.matMul(out.F32()[:n*oc], nil, nil, inp, w, bias, n, ch, oc)
}

// MatMulAdd fuses the residual add into the product's stores where the packing-free kernel
// runs: res + (bias + sum), rounded as the two passes round it.
func (c *CPU) MatMulAdd(out, res, inp, w, bias backend.Buf, n, ch, oc int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if out.Slice(0, n*oc).Overlaps(res.Slice(0, n*oc)) {
		panic("cpu: MatMulAdd: res overlaps the output") // OpenBLAS writes out before the add
	}
	o, r := out.F32()[:n*oc], res.F32()[:n*oc]
	if !c.matMul(o, r, nil, inp, w, bias, n, ch, oc) {
		c.runEW(opAdd, o, r, o, 0)
	}
}

// MatMulGELU applies GELU to each part of the product as it is finished, where the
// packing-free kernel runs.
func (c *CPU) MatMulGELU(pre, out, inp, w, bias backend.Buf, n, ch, oc int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, o := pre.F32()[:n*oc], out.F32()[:n*oc]
	if !c.matMul(p, nil, o, inp, w, bias, n, ch, oc) {
		c.runEW(opGELU, o, p, nil, 0)
	}
}

// matMul computes o = inp·wᵀ + bias. Through the packing-free kernel it also adds res (not
// nil) and writes gelu(o) into gelu (not nil), and says so; through OpenBLAS it leaves both
// to the caller.
func (c *CPU) matMul(o, res, gelu []float32, inp, w, bias backend.Buf, n, ch, oc int) (fused bool) {
	if ntFor(n) {
		// The kernel adds the bias as it stores each sum: the same bias + sum as the pass
		// below, without writing out first for the kernel to read back (from the other
		// worker's cache, as the two split out by rows and columns).
		var b []float32
		if !bias.Nil() {
			b = bias.F32()[:oc]
		}
		c.nt(o, res, inp.F32(), w.F32(), b, gelu, n, oc, ch, ch, ch, oc)
		return true
	}
	beta := float32(0)
	if !bias.Nil() {
		c.bias = biasJob{out: o, bias: bias.F32()[:oc], oc: oc}
		c.pool.run(&c.bias, n, max(1, 16384/oc))
		c.bias = biasJob{}
		beta = 1
	}
	c.gemm(false, true, n, oc, ch, 1, inp.F32(), ch, w.F32(), ch, beta, o, oc)
	return false
}

func (c *CPU) MatMulBackward(dinp, dw, dbias, dout, inp, w backend.Buf, n, ch, oc int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := dout.F32()[:n*oc]
	// The input gradient is OpenBLAS's at every size: the packing-free kernel reads w by rows
	// and dx = dy·w needs it by columns, which a transposed copy of w would cost as much as
	// the product at a few dozen rows.
	if !dinp.Nil() {
		c.gemm(false, false, n, ch, oc, 1, d, oc, w.F32(), ch, 0, dinp.F32(), ch)
	}
	c.gemm(true, false, oc, ch, n, 1, d, oc, inp.F32(), ch, 1, dw.F32(), ch)
	if !dbias.Nil() {
		c.bgrad = biasGradJob{dbias: dbias.F32(), dout: d, n: n, oc: oc}
		c.pool.run(&c.bgrad, oc, 64)
		c.bgrad = biasGradJob{}
	}
}
