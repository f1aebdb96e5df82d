package cpu

import "github.com/rookscript/rookscript/engine/backend"

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

// ntJob runs the product kernel of gemm_small.c over column ranges: part p computes the
// output columns [starts[p], starts[p+1]), reading only its rows of w; or, when rows is set,
// over row ranges: part p computes rows [p·rows, (p+1)·rows) over every column.
type ntJob struct {
	out, a, w     []float32
	res, bias     []float32 // nil: none
	gelu          []float32 // not nil: gelu(out) is written here too, a part at a time
	m, n, k       int
	lda, ldw, ldo int
	starts        [ntMaxParts + 1]int32
	rows          int // > 0: parts are runs of this many rows, each over all columns
	kern          ntKernel
	scratch       [][]float32 // per worker, or nil: the kernel copies no blocks
}

// ntMaxParts bounds the column parts of one product.
const ntMaxParts = 64

// cutColumns cuts the n columns into parts for workers and returns their number: one part
// when split is false; else whole grains of ntColumns, each part a quarter of what is left
// for two workers (1/(2·workers) of it), at least a grain: long runs of w's rows first, then
// ever shorter ones, so that the workers finish together when one of them started late or
// was slowed by the rest of the machine (parts of equal size left the other waiting for up
// to one of them at every product). GPT-2 124M's decode steps at 64 and 8 rows and its
// forward take less time so than with four equal parts per worker (BenchmarkDecode124M,
// BenchmarkForward124M).
func (j *ntJob) cutColumns(n int, split bool, workers int) int {
	if !split {
		j.starts[0], j.starts[1] = 0, int32(n)
		return 1
	}
	p, at := 0, 0
	for left := (n + ntColumns - 1) / ntColumns; left > 0; p++ {
		g := max(1, (left+2*workers-1)/(2*workers))
		if p == ntMaxParts-1 {
			g = left
		}
		j.starts[p] = int32(at * ntColumns)
		at, left = at+g, left-g
	}
	j.starts[p] = int32(n)
	return p
}

func (j *ntJob) run(w, lo, hi int) {
	var scratch []float32
	if j.scratch != nil {
		scratch = j.scratch[w]
	}
	if j.rows > 0 {
		for p := lo; p < hi; p++ {
			i0, i1 := p*j.rows, min(j.m, (p+1)*j.rows)
			var res []float32
			if j.res != nil {
				res = j.res[i0*j.ldo:]
			}
			cGemmNT(j.out[i0*j.ldo:], res, j.a[i0*j.lda:], j.w, j.bias, i1-i0, 0, j.n, j.k, j.lda, j.ldw, j.ldo, j.kern, scratch)
			if j.gelu != nil {
				cGELURows(j.gelu[i0*j.ldo:], j.out[i0*j.ldo:], i1-i0, j.n, j.ldo)
			}
		}
		return
	}
	for p := lo; p < hi; p++ {
		j0, j1 := int(j.starts[p]), int(j.starts[p+1])
		cGemmNT(j.out, j.res, j.a, j.w, j.bias, j.m, j0, j1, j.k, j.lda, j.ldw, j.ldo, j.kern, scratch)
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
// (whole tiles of the kernel), long ones first and short ones last (cutColumns). A training
// batch's product (more rows than ntCopyRows, and at least a quarter as many rows as
// columns) is cut into runs of rows instead, one per worker: split by columns, every part
// read all of a and, at k = 3072, copied it, costing those products more CPU time. No result
// depends on the split, nor on the number of rows.
func (c *CPU) nt(out, res, a, w, bias, gelu []float32, m, n, k, lda, ldw, ldo int) {
	split := c.pool.workers > 1 && m*n*k >= gemmMinWork
	c.ntj = ntJob{out: out, res: res, a: a, w: w, bias: bias, gelu: gelu, m: m, n: n, k: k, lda: lda, ldw: ldw, ldo: ldo, kern: ntUse}
	if ntUse == ntAVX512 && m > ntCopyRows {
		c.ntj.scratch = c.scratchFor(ntScratch(k))
	}
	if split && m > ntCopyRows && 4*m >= n {
		rows := (m + c.pool.workers - 1) / c.pool.workers
		c.ntj.rows = (rows + 11) / 12 * 12
		c.pool.run(&c.ntj, (m+c.ntj.rows-1)/c.ntj.rows, 1)
	} else {
		c.pool.run(&c.ntj, c.ntj.cutColumns(n, split, c.pool.workers), 1)
	}
	c.ntj = ntJob{}
}

// ntUse is the product kernel MatMul runs: the fastest the processor has (tests switch it to
// hold the others to the same bits).
var ntUse = bestNTKernel()

// ntCopyRows: products of more rows than this let the kernel copy its blocks of a and w
// (gemm_small.c); a decode step's products, whose weights come from memory once, do not.
const ntCopyRows = 96

// ntColumns is the column grain of a MatMul part: whole tiles of the kernel, and few enough
// parts per worker that each streams a long run of weight rows.
const ntColumns = 64

func (c *CPU) MatMul(out, inp, w, bias backend.Buf, n, ch, oc int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.matMul(out.F32()[:n*oc], nil, nil, inp, w, bias, n, ch, oc)
}

// MatMulAdd fuses the residual add into the product's stores: res + (bias + sum), rounded as
// the two passes round it.
func (c *CPU) MatMulAdd(out, res, inp, w, bias backend.Buf, n, ch, oc int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if out.Slice(0, n*oc).Overlaps(res.Slice(0, n*oc)) {
		panic("cpu: MatMulAdd: res overlaps the output")
	}
	c.matMul(out.F32()[:n*oc], res.F32()[:n*oc], nil, inp, w, bias, n, ch, oc)
}

// MatMulGELU applies GELU to each part of the product as it is finished.
func (c *CPU) MatMulGELU(pre, out, inp, w, bias backend.Buf, n, ch, oc int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.matMul(pre.F32()[:n*oc], nil, out.F32()[:n*oc], inp, w, bias, n, ch, oc)
}

// matMul computes o = res + (bias + inp·wᵀ) (res nil: none) and, when gelu is not nil,
// gelu(o) into gelu. Every forward product runs here, through gemm_small.c's kernel at every
// row count: each output element is the same sum of the same products in the same order
// whatever the rows around it, so a row's result does not depend on the batch it came in
// (DESIGN §6.1). The kernel adds the bias as it stores each sum.
func (c *CPU) matMul(o, res, gelu []float32, inp, w, bias backend.Buf, n, ch, oc int) {
	var b []float32
	if !bias.Nil() {
		b = bias.F32()[:oc]
	}
	c.nt(o, res, inp.F32(), w.F32(), b, gelu, n, oc, ch, ch, ch, oc)
}

// BLASMatMul computes out (n, oc) = inp (n, ch) · w (oc, ch)ᵀ through OpenBLAS on the pool,
// as the backward's GEMMs run. No forward product runs it (they are MatMul's, batch-invariant):
// it is the SGEMM rate benchmarks hold MatMul's kernel against (rookbench's floor).
func (c *CPU) BLASMatMul(out, inp, w backend.Buf, n, ch, oc int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gemm(false, true, n, oc, ch, 1, inp.F32()[:n*ch], ch, w.F32()[:oc*ch], ch, 0, out.F32()[:n*oc], oc)
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
