package gpt2

import "github.com/rookscript/rookscript/engine/backend"

// activations holds what the forward saves for the backward, and the backward's scratch,
// for up to n rows (tokens) and r scored rows. Buffers grow only when a larger batch comes.
type activations struct {
	n, r int

	tok, pos, rows, targets backend.I32 // (n), (n), (r), (r)
	slot                    backend.I32 // (n) KV-cache slot of each row (prefill, decode)

	encoded backend.Buf // (n, C) embeddings: the residual stream entering block 0
	layers  []layerActs
	lnf     backend.Buf // (n, C)
	lnfMean backend.Buf // (n)
	lnfRstd backend.Buf // (n)
	proj    backend.Buf // (n, C) scratch: an attention or MLP projection before the residual add

	headIn backend.Buf // (r, C) final LayerNorm output at the scored rows
	logits backend.Buf // (r, V); overwritten by dlogits in the backward
	lse    backend.Buf // (r)
	logp   backend.Buf // (r)
	ent    backend.Buf // (r)
	dlogp  backend.Buf // (r)
	dent   backend.Buf // (r)

	// Backward scratch, shared by all layers.
	dres    backend.Buf // (n, C) gradient of the residual stream
	dln     backend.Buf // (n, C)
	dattY   backend.Buf // (n, C)
	dqkv    backend.Buf // (n, 3C)
	dfch    backend.Buf // (n, 4C)
	dfchG   backend.Buf // (n, 4C)
	dheadIn backend.Buf // (r, C)

	// Host-side staging of the batch description and of logits for sampling.
	hostPos    []int32
	hostSlot   []int32
	hostLogits []float32
	hostProbs  []float32
	hostLSE    []float32
	pack       backend.Pack

	probs backend.Buf // (r, V) sampling distribution; allocated on the first Prefill/Decode
}

type layerActs struct {
	ln1, ln1Mean, ln1Rstd backend.Buf // (n, C), (n), (n)
	qkv                   backend.Buf // (n, 3C)
	attY                  backend.Buf // (n, C) attention output before the projection
	attLse                backend.Buf // (n, NH) log-sum-exp of each row's scores
	res2                  backend.Buf // (n, C) residual after attention
	ln2, ln2Mean, ln2Rstd backend.Buf // (n, C), (n), (n)
	fch                   backend.Buf // (n, 4C) MLP pre-activation
	fchG                  backend.Buf // (n, 4C) after GELU
	res3                  backend.Buf // (n, C) residual after the MLP: the block's output
}

// ensureActs makes room for n rows and r scored rows.
func (m *Model) ensureActs(n, r int) *activations {
	a := m.act
	if a != nil && a.n >= n && a.r >= r {
		return a
	}
	if a != nil {
		n, r = max(n, a.n), max(r, a.r)
	}
	b, cfg := m.B, m.Config
	c, v := cfg.Channels, cfg.VocabSize
	a = &activations{n: n, r: r}
	a.tok, a.pos, a.rows, a.targets = b.AllocI32(n), b.AllocI32(n), b.AllocI32(max(r, 1)), b.AllocI32(max(r, 1))
	a.slot = b.AllocI32(n)
	a.encoded = b.Alloc(n * c)
	for range cfg.NumLayers {
		a.layers = append(a.layers, layerActs{
			ln1: b.Alloc(n * c), ln1Mean: b.Alloc(n), ln1Rstd: b.Alloc(n),
			qkv: b.Alloc(n * 3 * c), attY: b.Alloc(n * c), attLse: b.Alloc(n * cfg.NumHeads),
			res2: b.Alloc(n * c),
			ln2:  b.Alloc(n * c), ln2Mean: b.Alloc(n), ln2Rstd: b.Alloc(n),
			fch: b.Alloc(n * 4 * c), fchG: b.Alloc(n * 4 * c), res3: b.Alloc(n * c),
		})
	}
	a.lnf, a.lnfMean, a.lnfRstd = b.Alloc(n*c), b.Alloc(n), b.Alloc(n)
	a.proj = b.Alloc(n * c)
	r1 := max(r, 1)
	a.headIn, a.logits = b.Alloc(r1*c), b.Alloc(r1*v)
	a.lse, a.logp, a.ent, a.dlogp, a.dent = b.Alloc(r1), b.Alloc(r1), b.Alloc(r1), b.Alloc(r1), b.Alloc(r1)
	a.hostPos = make([]int32, 0, n)
	m.act = a
	return a
}

// ensureBackward allocates the backward's scratch for the current activation sizes; models
// that only sample or score never pay for it.
func (m *Model) ensureBackward(a *activations) {
	if !a.dres.Nil() {
		return
	}
	b, c, n, r1 := m.B, m.Config.Channels, a.n, max(a.r, 1)
	a.dres, a.dln, a.dattY = b.Alloc(n*c), b.Alloc(n*c), b.Alloc(n*c)
	a.dqkv, a.dfch, a.dfchG = b.Alloc(n*3*c), b.Alloc(n*4*c), b.Alloc(n*4*c)
	a.dheadIn = b.Alloc(r1 * c)
}
