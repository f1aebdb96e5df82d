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
// It consumes the forward's activations: call Forward again before the next Backward.
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
	bk, cfg, p, g := m.B, m.Config, m.p, m.g
	n, r, c, v := lf.n, lf.r, cfg.Channels, cfg.VocabSize

	// LM head: dlogits in place, then the tied embedding's gradient and the scored rows'
	// gradient, scattered back into the (n, C) final-LayerNorm gradient.
	bk.Fill(a.dln.Slice(0, n*c), 0)
	if r > 0 {
		bk.Upload(a.dlogp.Slice(0, r), dlogp)
		dentBuf := backend.Buf{}
		if dent != nil {
			bk.Upload(a.dent.Slice(0, r), dent)
			dentBuf = a.dent
		}
		bk.LogProbsBackward(a.logits, a.lse, a.ent, a.dlogp, dentBuf, a.targets, r, v, lf.invTemp)
		bk.MatMulBackward(a.dheadIn, g.wte, backend.Buf{}, a.logits, a.headIn, p.wte, r, c, v)
		bk.ScatterRows(a.dln, a.dheadIn, a.rows.Slice(0, r), c)
	}
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
	return nil
}
