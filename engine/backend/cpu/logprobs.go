package cpu

import (
	"math"

	"github.com/rookscript/rookscript/engine/backend"
)

// Log-probabilities of chosen tokens under softmax(logits·invTemp), one vocabulary row per
// work item. Sums run in float64 over float32 exponentials: a row has ~50k terms.

type logProbsJob struct {
	backward               bool
	logits, lse, logp, ent []float32
	dlogp, dent            []float32
	sums                   []float64 // two per row, written by the C kernel
	targets                []int32
	v                      int
	invTemp                float32
}

func (j *logProbsJob) run(_, lo, hi int) {
	for r := lo; r < hi; r++ {
		row := j.logits[r*j.v : (r+1)*j.v]
		if j.backward {
			j.backwardRow(r, row)
			continue
		}
		it := j.invTemp
		m := cMaxScaled(row, it)
		// s = Σ e^{z−m}, t = Σ e^{z−m}·z, so H = lse − t/s.
		sums := j.sums[2*r : 2*r+2]
		cExpSums(row, it, m, sums)
		s, tz := sums[0], sums[1]
		lse := lseOf(m, s)
		j.lse[r] = lse
		j.logp[r] = float32(row[j.targets[r]]*it) - lse
		if j.ent != nil {
			j.ent[r] = lse - float32(tz/s)
		}
	}
}

// lseOf is a row's log-sum-exp from its max m and its sum s = Σ e^{z−m}: the one expression
// LogProbs and Softmax share, so that the sampler's log-sum-exp is the training forward's bit
// for bit (DESIGN §6.1).
func lseOf(m float32, s float64) float32 { return m + float32(math.Log(s)) }

// backwardRow writes dL/dlogits over the row: with p = softmax(z), z = logits·invTemp,
// dL/dz_k = dlogp·(1[k=y] − p_k) − dent·p_k·(log p_k + H), and dL/dlogits = invTemp·dL/dz.
func (j *logProbsJob) backwardRow(r int, row []float32) {
	it, lse := j.invTemp, j.lse[r]
	gl := j.dlogp[r]
	var ge, h float32
	if j.dent != nil {
		ge, h = j.dent[r], j.ent[r]
	}
	cLogProbBackward(row, it, lse, gl, ge, h)
	row[j.targets[r]] += gl * it
}

func (c *CPU) LogProbs(lse, logp, ent, logits backend.Buf, targets backend.I32, rows, v int, invTemp float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var e []float32
	if !ent.Nil() {
		e = ent.F32()
	}
	if cap(c.lpSums) < 2*rows {
		c.lpSums = make([]float64, 2*rows)
	}
	c.lp = logProbsJob{logits: logits.F32(), lse: lse.F32(), logp: logp.F32(), ent: e, targets: targets.Ints()[:rows], v: v, invTemp: invTemp, sums: c.lpSums[:2*rows]}
	c.pool.run(&c.lp, rows, 1)
	c.lp = logProbsJob{}
}

func (c *CPU) LogProbsBackward(logits, lse, ent, dlogp, dent backend.Buf, targets backend.I32, rows, v int, invTemp float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var e, de []float32
	if !dent.Nil() {
		e, de = ent.F32(), dent.F32()
	}
	c.lp = logProbsJob{backward: true, logits: logits.F32(), lse: lse.F32(), ent: e, dlogp: dlogp.F32(), dent: de, targets: targets.Ints()[:rows], v: v, invTemp: invTemp}
	c.pool.run(&c.lp, rows, 1)
	c.lp = logProbsJob{}
}

// softmaxJob is the sampler's distribution: its max and sum are LogProbs's (the same kernels
// in the same order), so a recorded logprob, logits·invTemp − lse, is the training forward's.
type softmaxJob struct {
	probs, lse, logits []float32
	sums               []float64 // one per row
	v                  int
	invTemp            float32
}

func (j *softmaxJob) run(_, lo, hi int) {
	for r := lo; r < hi; r++ {
		m := cSoftmax(j.probs[r*j.v:(r+1)*j.v], j.logits[r*j.v:(r+1)*j.v], j.invTemp, &j.sums[r])
		j.lse[r] = lseOf(m, j.sums[r])
	}
}

func (c *CPU) Softmax(probs, lse, logits backend.Buf, rows, v int, invTemp float32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cap(c.lpSums) < rows {
		c.lpSums = make([]float64, 2*rows)
	}
	c.sm = softmaxJob{probs: probs.F32(), lse: lse.F32(), logits: logits.F32(), sums: c.lpSums[:rows], v: v, invTemp: invTemp}
	c.pool.run(&c.sm, rows, 1)
	c.sm = softmaxJob{}
}
