package cpu

import "github.com/rookscript/rookscript/engine/backend"

// lnGrain is the number of rows per chunk of a LayerNorm. The backward's dw/db partial sums
// are per chunk, so this constant (not the thread count) fixes the summation order.
const lnGrain = 16

// lnForwardGrain is the rows per chunk of a LayerNorm forward, whose rows are independent:
// 64 rows of GPT-2's 768 channels take the vector kernel no longer than waking the pool's
// other goroutine costs (BenchmarkPoolWake), so a decode step's LayerNorms run on the calling
// thread alone, which is faster than chunks of 16 rows (BenchmarkDecode124M).
const lnForwardGrain = 64

type layerNormJob struct {
	backward                   bool
	out, inp, w, b, mean, rstd []float32
	dinp, dw, db, dout         []float32
	c                          int
	eps                        float32
	partial                    []float32 // backward: per chunk, dw then db (2c floats)
}

func (j *layerNormJob) run(_, lo, hi int) {
	if j.backward {
		j.backwardRows(lo, hi)
		return
	}
	c := j.c
	cLayerNorm(j.out[lo*c:hi*c], j.mean[lo:hi], j.rstd[lo:hi], j.inp[lo*c:hi*c], j.w[:c], j.b[:c], hi-lo, c, j.eps)
}

// backwardRows adds rows lo .. hi-1's input gradients into dinp and their dw, db terms into
// the chunk's partial sums, in row order.
func (j *layerNormJob) backwardRows(lo, hi int) {
	c := j.c
	p := j.partial[(lo/lnGrain)*2*c:][:2*c]
	cLayerNormBackward(j.dinp[lo*c:hi*c], p[:c], p[c:], j.dout[lo*c:hi*c], j.inp[lo*c:hi*c], j.w[:c], j.mean[lo:hi], j.rstd[lo:hi], hi-lo, c)
}

func (c *CPU) LayerNorm(out, mean, rstd, inp, w, b backend.Buf, n, ch int, eps float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ln = layerNormJob{out: out.F32(), inp: inp.F32(), w: w.F32(), b: b.F32(), mean: mean.F32(), rstd: rstd.F32(), c: ch, eps: eps}
	c.pool.run(&c.ln, n, lnForwardGrain)
	c.ln = layerNormJob{}
}

func (c *CPU) LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd backend.Buf, n, ch int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	chunks := chunkCount(n, lnGrain)
	partial := growZero(&c.lnPart, chunks*2*ch)
	c.ln = layerNormJob{backward: true, dinp: dinp.F32(), dw: dw.F32(), db: db.F32(), dout: dout.F32(), inp: inp.F32(), w: w.F32(), mean: mean.F32(), rstd: rstd.F32(), c: ch, partial: partial}
	c.pool.run(&c.ln, n, lnGrain)
	c.ln = layerNormJob{}
	// Combine the chunks' partial dw, db in chunk order: each column summed over the chunks.
	cColSums(dw.F32()[:ch], partial, chunks, 2*ch)
	cColSums(db.F32()[:ch], partial[ch:], chunks, 2*ch)
}
