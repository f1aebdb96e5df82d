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
	acc := j.dbias[lo:hi]
	for i := 0; i < j.n; i++ {
		row := j.dout[i*j.oc+lo : i*j.oc+hi]
		for k, v := range row {
			acc[k] += v
		}
	}
}

func (c *CPU) MatMul(out, inp, w, bias backend.Buf, n, ch, oc int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := out.F32()[:n*oc]
	beta := float32(0)
	if !bias.Nil() {
		c.bias = biasJob{out: o, bias: bias.F32()[:oc], oc: oc}
		c.pool.run(&c.bias, n, max(1, 16384/oc))
		c.bias = biasJob{}
		beta = 1
	}
	sgemm(false, true, n, oc, ch, 1, inp.F32(), ch, w.F32(), ch, beta, o, oc)
}

func (c *CPU) MatMulBackward(dinp, dw, dbias, dout, inp, w backend.Buf, n, ch, oc int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := dout.F32()[:n*oc]
	if !dinp.Nil() {
		sgemm(false, false, n, ch, oc, 1, d, oc, w.F32(), ch, 0, dinp.F32(), ch)
	}
	sgemm(true, false, oc, ch, n, 1, d, oc, inp.F32(), ch, 1, dw.F32(), ch)
	if !dbias.Nil() {
		c.bgrad = biasGradJob{dbias: dbias.F32(), dout: d, n: n, oc: oc}
		c.pool.run(&c.bgrad, oc, 64)
		c.bgrad = biasGradJob{}
	}
}
