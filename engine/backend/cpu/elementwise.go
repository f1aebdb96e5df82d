package cpu

import "github.com/rookscript/rookscript/engine/backend"

// Elementwise kernels share one job with an op code: they are memory-bound loops over
// equal-length slices, cut into chunks large enough to amortise the dispatch.
const ewGrain = 1 << 15

// zeroGrain is the chunk of a zero fill of at least two of them (ZeroGrads of a large model):
// Go's memclr stores past the caches from 32 MB on (runtime/memclr_amd64.s), so a buffer far
// larger than any cache is written once instead of read for ownership and written. Chunks
// of ewGrain fall below that threshold, and clearing GPT-2 124M's 500 MB of gradients in them
// is much slower.
const zeroGrain = 1 << 23

type ewOp int

const (
	opCopy ewOp = iota
	opFill
	opAdd
	opAddTo
	opScale
	opGELU
	opGELUBackward
)

type ewJob struct {
	op      ewOp
	a, b, o []float32
	s       float32
}

func (j *ewJob) run(_, lo, hi int) {
	o := j.o[lo:hi]
	switch j.op {
	case opCopy:
		copy(o, j.a[lo:hi])
	case opFill:
		if j.s == 0 {
			clear(o)
			break
		}
		for i := range o {
			o[i] = j.s
		}
	case opAdd:
		a, b := j.a[lo:hi], j.b[lo:hi]
		for i := range o {
			o[i] = a[i] + b[i]
		}
	case opAddTo:
		a := j.a[lo:hi]
		for i := range o {
			o[i] += a[i]
		}
	case opScale:
		for i := range o {
			o[i] *= j.s
		}
	case opGELU:
		cGELU(o, j.a[lo:hi])
	case opGELUBackward:
		cGELUBackward(o, j.a[lo:hi], j.b[lo:hi])
	}
}

func (c *CPU) elementwise(op ewOp, o, a, b []float32, s float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runEW(op, o, a, b, s)
}

// runEW runs one op over o; the caller holds c.mu.
func (c *CPU) runEW(op ewOp, o, a, b []float32, s float32) {
	c.ew = ewJob{op: op, o: o, a: a, b: b, s: s}
	grain := ewGrain
	if op == opFill && s == 0 && len(o) >= 2*zeroGrain {
		grain = zeroGrain
	}
	c.pool.run(&c.ew, len(o), grain)
	c.ew = ewJob{}
}

func sameLen(name string, bufs ...backend.Buf) {
	for _, b := range bufs[1:] {
		if b.N != bufs[0].N {
			panic("cpu: " + name + ": buffer sizes differ")
		}
	}
}

func (c *CPU) Copy(dst, src backend.Buf) {
	sameLen("Copy", dst, src)
	c.elementwise(opCopy, dst.F32(), src.F32(), nil, 0)
}

func (c *CPU) Fill(dst backend.Buf, v float32) { c.elementwise(opFill, dst.F32(), nil, nil, v) }

func (c *CPU) Add(out, a, b backend.Buf) {
	sameLen("Add", out, a, b)
	c.elementwise(opAdd, out.F32(), a.F32(), b.F32(), 0)
}

func (c *CPU) AddTo(dst, src backend.Buf) {
	sameLen("AddTo", dst, src)
	c.elementwise(opAddTo, dst.F32(), src.F32(), nil, 0)
}

func (c *CPU) Scale(dst backend.Buf, s float32) { c.elementwise(opScale, dst.F32(), nil, nil, s) }

func (c *CPU) GELU(out, inp backend.Buf) {
	sameLen("GELU", out, inp)
	c.elementwise(opGELU, out.F32(), inp.F32(), nil, 0)
}

func (c *CPU) GELUBackward(dinp, inp, dout backend.Buf) {
	sameLen("GELUBackward", dinp, inp, dout)
	c.elementwise(opGELUBackward, dinp.F32(), inp.F32(), dout.F32(), 0)
}
