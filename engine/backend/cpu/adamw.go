package cpu

import (
	"math"

	"github.com/rookscript/rookscript/engine/backend"
)

// AdamW as torch.optim.AdamW computes it: decoupled decay p ← p(1 − lr·wd), moments,
// then p ← p − (lr/bc1)·m / (√v/√bc2 + eps).
type adamJob struct {
	p, g, m, v               []float32
	b1, b2, eps, decay, step float32
	invSqrtBC2               float32
}

const adamGrain = 1 << 14

func (j *adamJob) run(_, lo, hi int) {
	cAdamW(j.p[lo:hi], j.g[lo:hi], j.m[lo:hi], j.v[lo:hi], j.b1, j.b2, j.eps, j.decay, j.step, j.invSqrtBC2)
}

func (c *CPU) AdamW(p, g, m, v backend.Buf, h backend.AdamW) {
	sameLen("AdamW", p, g, m, v)
	backend.CheckSpans("cpu: AdamW", p.N, h.NoDecay, true)
	c.mu.Lock()
	defer c.mu.Unlock()
	bc1 := 1 - math.Pow(float64(h.Beta1), float64(h.Step))
	bc2 := 1 - math.Pow(float64(h.Beta2), float64(h.Step))
	job := adamJob{
		b1: h.Beta1, b2: h.Beta2, eps: h.Eps,
		step:       float32(float64(h.LR) / bc1),
		invSqrtBC2: float32(1 / math.Sqrt(bc2)),
	}
	// The update is elementwise, so a run at a time gives the bits of one pass.
	run := func(lo, hi int, decay float32) {
		c.adam = job
		c.adam.p, c.adam.g, c.adam.m, c.adam.v = p.F32()[lo:hi], g.F32()[lo:hi], m.F32()[lo:hi], v.F32()[lo:hi]
		c.adam.decay = decay
		c.pool.run(&c.adam, hi-lo, adamGrain)
	}
	decay, at := 1-h.LR*h.WeightDecay, 0
	for _, s := range h.NoDecay {
		run(at, s.Off, decay)
		run(s.Off, s.Off+s.N, 1) // 1 − lr·0
		at = s.Off + s.N
	}
	run(at, p.N, decay)
	c.adam = adamJob{}
}

// sumSquaresJob writes each chunk's Σx² into its own slot; the slots are added in order.
type sumSquaresJob struct {
	x   []float32
	out []float64
}

const sqGrain = 1 << 16

func (j *sumSquaresJob) run(_, lo, hi int) {
	x := j.x[lo:hi]
	var a, b, c, d float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a += float64(x[i]) * float64(x[i])
		b += float64(x[i+1]) * float64(x[i+1])
		c += float64(x[i+2]) * float64(x[i+2])
		d += float64(x[i+3]) * float64(x[i+3])
	}
	for ; i < len(x); i++ {
		a += float64(x[i]) * float64(x[i])
	}
	j.out[lo/sqGrain] = (a + b) + (c + d)
}

func (c *CPU) SumSquares(b backend.Buf) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sumSquares(b.F32())
}

// SumSquaresMany is SumSquares over each span in turn: on the CPU a call costs nothing, and
// the same reduction keeps every norm's bits.
func (c *CPU) SumSquaresMany(b backend.Buf, spans []backend.Span, out []float64) {
	if len(out) != len(spans) {
		panic("cpu: SumSquaresMany: out and spans differ in length")
	}
	backend.CheckSpans("cpu: SumSquaresMany", b.N, spans, false)
	c.mu.Lock()
	defer c.mu.Unlock()
	x := b.F32()
	for i, s := range spans {
		out[i] = c.sumSquares(x[s.Off : s.Off+s.N])
	}
}

// sumSquares is Σx² over chunks of sqGrain, added in order; c.mu is held.
func (c *CPU) sumSquares(x []float32) float64 {
	part := c.partialsFor(chunkCount(len(x), sqGrain))
	c.sq = sumSquaresJob{x: x, out: part}
	c.pool.run(&c.sq, len(x), sqGrain)
	c.sq = sumSquaresJob{}
	var s float64
	for _, v := range part {
		s += v
	}
	return s
}
