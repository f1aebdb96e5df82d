package gpt2

import (
	"errors"
	"fmt"

	"github.com/rookscript/rookscript/engine/backend"
)

// Backward accumulates into Grads the gradient of L = Σ_r dlogp[r]·logp[r] + Σ_r dent[r]·H[r]
// over the scored rows of the last Forward: dlogp[r] is ∂L/∂logp_r (−1/N for mean
// cross-entropy, −A/|o| for a GRPO policy-gradient token) and dent, which may be nil, is
// ∂L/∂H_r for an entropy term (the forward must have computed entropy).
//
// The forward kept no logits, only each scored row's log-sum-exp (and entropy): the head's
// backward recomputes the logits chunk by chunk from the saved head input and turns each
// chunk into its gradient in place. It consumes the forward's activations: call Forward
// again before the next Backward.
func (m *Model) Backward(dlogp, dent []float32) error {
	lf := m.last
	if !lf.valid {
		return errors.New("gpt2: Backward without a preceding Forward")
	}
	if len(dlogp) != lf.r {
		return fmt.Errorf("gpt2: Backward got %d row gradients for %d scored rows", len(dlogp), lf.r)
	}
	if dent != nil && (!lf.entropy || len(dent) != lf.r) {
		return fmt.Errorf("gpt2: entropy gradient needs a forward with entropy and %d rows", lf.r)
	}
	m.last.valid = false
	m.EnsureGrads()
	a := m.act
	m.ensureBackward(a)
	bk, n, r, c, v := m.B, lf.n, lf.r, m.Config.Channels, m.Config.VocabSize

	bk.Fill(a.dln.Slice(0, n*c), 0)
	if r > 0 {
		bk.Upload(a.dlogp.Slice(0, r), dlogp)
		if dent != nil {
			bk.Upload(a.dent.Slice(0, r), dent)
		}
		size := a.chunkRows(r)
		for lo := 0; lo < r; lo += size {
			rows := min(size, r-lo)
			logits := a.logits.Slice(0, rows*v)
			m.headLogits(a, logits, lo, rows)
			dentBuf := backend.Buf{}
			if dent != nil {
				dentBuf = a.dent.Slice(lo, rows)
			}
			m.headBackward(a, logits, lo, rows, lf.invTemp, a.dlogp.Slice(lo, rows), dentBuf)
		}
	}
	m.trunkBackward(a, n)
	return nil
}

// headBackward turns a chunk's logits (scored rows lo .. lo+rows-1) into dL/dlogits in place,
// adds their product with the head input to the tied embedding's gradient, and scatters the
// head input's gradient into a.dln at the chunk's rows.
func (m *Model) headBackward(a *activations, logits backend.Buf, lo, rows int, invTemp float32, dlogp, dent backend.Buf) {
	bk, c, v := m.B, m.Config.Channels, m.Config.VocabSize
	ent := backend.Buf{}
	if !dent.Nil() {
		ent = a.ent.Slice(lo, rows)
	}
	bk.LogProbsBackward(logits, a.lse.Slice(lo, rows), ent, dlogp, dent, a.targets.Slice(lo, rows), rows, v, invTemp)
	dheadIn := a.dheadIn.Slice(0, rows*c)
	bk.MatMulBackward(dheadIn, m.g.wte, backend.Buf{}, logits, a.headIn.Slice(lo*c, rows*c), m.p.wte, rows, c, v)
	bk.ScatterRows(a.dln, dheadIn, a.rows.Slice(lo, rows), c)
}

// trunkBackward runs the final LayerNorm's and every block's backward from the gradient of
// the final LayerNorm's output in a.dln, and the embeddings' last.
func (m *Model) trunkBackward(a *activations, n int) {
	bk, cfg, p, g := m.B, m.Config, m.p, m.g
	c := cfg.Channels
	last := a.encoded
	if cfg.NumLayers > 0 {
		last = a.layers[cfg.NumLayers-1].res3
	}
	bk.Fill(a.dres.Slice(0, n*c), 0)
	bk.LayerNormBackward(a.dres, g.lnfw, g.lnfb, a.dln, last, p.lnfw, a.lnfMean, a.lnfRstd, n, c)

	// Blocks in reverse. dres holds the gradient of the block's output; residual adds pass
	// it through unchanged, and each LayerNorm backward adds its input gradient into it.
	for l := cfg.NumLayers - 1; l >= 0; l-- {
		w, gw, la := p.blocks[l], g.blocks[l], &a.layers[l]
		residual := a.encoded
		if l > 0 {
			residual = a.layers[l-1].res3
		}
		bk.MatMulBackward(a.dfchG, gw.fcprojw, gw.fcprojb, a.dres, la.fchG, w.fcprojw, n, 4*c, c)
		bk.GELUBackward(a.dfch.Slice(0, n*4*c), la.fch.Slice(0, n*4*c), a.dfchG.Slice(0, n*4*c))
		bk.MatMulBackward(a.dln, gw.fcw, gw.fcb, a.dfch, la.ln2, w.fcw, n, c, 4*c)
		bk.LayerNormBackward(a.dres, gw.ln2w, gw.ln2b, a.dln, la.res2, w.ln2w, la.ln2Mean, la.ln2Rstd, n, c)
		bk.MatMulBackward(a.dattY, gw.attprojw, gw.attprojb, a.dres, la.attY, w.attprojw, n, c, c)
		bk.AttentionBackward(a.dqkv, a.dattY, la.attY, la.attLse, la.qkv, a.pack, cfg.NumHeads, c)
		bk.MatMulBackward(a.dln, gw.qkvw, gw.qkvb, a.dqkv, la.ln1, w.qkvw, n, c, 3*c)
		bk.LayerNormBackward(a.dres, gw.ln1w, gw.ln1b, a.dln, residual, w.ln1w, la.ln1Mean, la.ln1Rstd, n, c)
	}
	bk.EncoderBackward(g.wte, g.wpe, a.dres, a.tok, a.pos, n, c)
}
