package cpu

import (
	"math"

	"github.com/rookscript/rookscript/engine/backend"
)

// lnGrain is the number of rows per chunk of a LayerNorm. The backward's dw/db partial sums
// are per chunk, so this constant (not the thread count) fixes the summation order.
const lnGrain = 16

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
	i := lo
	for ; i+4 <= hi; i += 4 {
		j.rows4(i)
	}
	for ; i < hi; i++ {
		j.row(i)
	}
}

// row normalises row i: its mean, its variance summed in float64 in element order, then the
// output.
func (j *layerNormJob) row(i int) {
	c := j.c
	x := j.inp[i*c : (i+1)*c]
	m := rowMean(x)
	var v float64
	for _, xv := range x {
		d := xv - m
		v += float64(d * d)
	}
	j.finish(i, m, v)
}

// rows4 normalises rows i..i+3 as row does, their four variance sums interleaved: each is
// the same chain of float64 additions in the same order, but four chains keep the adder busy
// where one waits on each addition's latency (a decode step's LayerNorms took 3 ms).
func (j *layerNormJob) rows4(i int) {
	c := j.c
	x0, x1, x2, x3 := j.inp[i*c:(i+1)*c], j.inp[(i+1)*c:(i+2)*c], j.inp[(i+2)*c:(i+3)*c], j.inp[(i+3)*c:(i+4)*c]
	m0, m1, m2, m3 := rowMean(x0), rowMean(x1), rowMean(x2), rowMean(x3)
	x1, x2, x3 = x1[:len(x0)], x2[:len(x0)], x3[:len(x0)]
	var v0, v1, v2, v3 float64
	for k, a := range x0 {
		d0, d1, d2, d3 := a-m0, x1[k]-m1, x2[k]-m2, x3[k]-m3
		v0 += float64(d0 * d0)
		v1 += float64(d1 * d1)
		v2 += float64(d2 * d2)
		v3 += float64(d3 * d3)
	}
	j.finish(i, m0, v0)
	j.finish(i+1, m1, v1)
	j.finish(i+2, m2, v2)
	j.finish(i+3, m3, v3)
}

// rowMean is a row's mean: its float64 sum, rounded, over its length.
func rowMean(x []float32) float32 { return float32(sum(x)) / float32(len(x)) }

// finish writes row i's output from its mean m and summed squared deviations v.
func (j *layerNormJob) finish(i int, m float32, v float64) {
	c := j.c
	x := j.inp[i*c : (i+1)*c]
	r := float32(1 / math.Sqrt(v/float64(c)+float64(j.eps)))
	o := j.out[i*c : (i+1)*c]
	w, b := j.w[:len(x)], j.b[:len(x)]
	o = o[:len(x)]
	for k, xv := range x {
		o[k] = (xv-m)*r*w[k] + b[k]
	}
	j.mean[i], j.rstd[i] = m, r
}

func (j *layerNormJob) backwardRows(lo, hi int) {
	c := j.c
	p := j.partial[(lo/lnGrain)*2*c:][:2*c]
	dw, db := p[:c], p[c:]
	for i := lo; i < hi; i++ {
		x := j.inp[i*c : (i+1)*c]
		d := j.dout[i*c : (i+1)*c]
		m, r := j.mean[i], j.rstd[i]
		// dnorm = w·dout; the two means the LayerNorm Jacobian needs.
		var s1, s2 float64
		for k, xv := range x {
			dn := j.w[k] * d[k]
			s1 += float64(dn)
			s2 += float64(dn * (xv - m) * r)
		}
		mean1, mean2 := float32(s1/float64(c)), float32(s2/float64(c))
		di := j.dinp[i*c : (i+1)*c]
		for k, xv := range x {
			norm := (xv - m) * r
			dw[k] += d[k] * norm
			db[k] += d[k]
			di[k] += (j.w[k]*d[k] - mean1 - norm*mean2) * r
		}
	}
}

// sum adds x in float64 with four accumulators.
func sum(x []float32) float64 {
	var a, b, c, d float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a += float64(x[i])
		b += float64(x[i+1])
		c += float64(x[i+2])
		d += float64(x[i+3])
	}
	for ; i < len(x); i++ {
		a += float64(x[i])
	}
	return (a + b) + (c + d)
}

func (c *CPU) LayerNorm(out, mean, rstd, inp, w, b backend.Buf, n, ch int, eps float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ln = layerNormJob{out: out.F32(), inp: inp.F32(), w: w.F32(), b: b.F32(), mean: mean.F32(), rstd: rstd.F32(), c: ch, eps: eps}
	c.pool.run(&c.ln, n, lnGrain)
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
	// Combine the chunks' partial dw, db in chunk order.
	gw, gb := dw.F32(), db.F32()
	for k := 0; k < chunks; k++ {
		p := partial[k*2*ch:]
		for i := 0; i < ch; i++ {
			gw[i] += p[i]
			gb[i] += p[ch+i]
		}
	}
}
