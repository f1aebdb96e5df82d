package gpt2

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/backend"
)

// Output is what a training forward returns for the scored rows of its batch, in row order.
type Output struct {
	LogP    []float32 // log softmax(logits/T)[target]
	Entropy []float32 // entropy of softmax(logits/T); nil unless asked for
}

// lastForward remembers what Backward needs from the most recent Forward.
type lastForward struct {
	valid   bool
	n, r    int
	entropy bool
	invTemp float32
}

// Forward runs the model over a packed batch and writes into out, for every scored row, the
// log-probability of its target under softmax(logits / temperature) and, if entropy is set,
// the entropy of that distribution (out's slices are reused when large enough, so a
// steady-state step allocates nothing). The activations stay for Backward.
//
// There is no dropout anywhere: training and sampling compute the same function.
func (m *Model) Forward(b *Batch, temperature float32, entropy bool, out *Output) error {
	if err := b.Validate(m.Config); err != nil {
		return err
	}
	if !(temperature > 0) {
		return fmt.Errorf("gpt2: temperature must be positive, got %g", temperature)
	}
	n, r := len(b.Tokens), len(b.Rows)
	a := m.ensureActs(n, r)
	m.upload(a, b)
	m.trunk(a, n, nil, false)
	if r > 0 {
		m.head(a, n, r, 1/temperature, entropy)
	}
	m.last = lastForward{valid: true, n: n, r: r, entropy: entropy, invTemp: 1 / temperature}
	out.LogP = resize(out.LogP, r)
	m.B.Download(out.LogP, a.logp.Slice(0, r))
	out.Entropy = out.Entropy[:0]
	if entropy {
		out.Entropy = resize(out.Entropy, r)
		m.B.Download(out.Entropy, a.ent.Slice(0, r))
	}
	return nil
}

// resize returns s with length n, reusing its storage when it is large enough.
func resize(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// Logits returns the raw logits (temperature 1) of the scored rows of the last Forward,
// row-major (r, V), until Backward overwrites them. Meant for tests and inspection.
func (m *Model) Logits() []float32 {
	r := m.last.r
	out := make([]float32, r*m.Config.VocabSize)
	if !m.last.valid || r == 0 {
		return out
	}
	m.B.Download(out, m.act.logits.Slice(0, len(out)))
	return out
}

func (m *Model) upload(a *activations, b *Batch) {
	n, r := len(b.Tokens), len(b.Rows)
	m.B.UploadI32(a.tok.Slice(0, n), b.Tokens)
	a.hostPos = b.positions(a.hostPos)
	m.B.UploadI32(a.pos.Slice(0, n), a.hostPos)
	m.B.UploadI32(a.rows.Slice(0, r), b.Rows)
	m.B.UploadI32(a.targets.Slice(0, r), b.Targets)
	b.pack(&a.pack)
}

// trunk runs the embeddings and every block over n rows. With a KV cache, each block's keys
// and values are also written to the cache at the rows' slots and positions; decode rows
// then attend over their slot of the cache instead of over the packed batch.
func (m *Model) trunk(a *activations, n int, kv *KVCache, decode bool) {
	bk, cfg, p := m.B, m.Config, m.p
	c, nh := cfg.Channels, cfg.NumHeads
	bk.Encoder(a.encoded, a.tok, a.pos, p.wte, p.wpe, n, c)
	residual := a.encoded
	for l := range cfg.NumLayers {
		w, la := p.blocks[l], &a.layers[l]
		bk.LayerNorm(la.ln1, la.ln1Mean, la.ln1Rstd, residual, w.ln1w, w.ln1b, n, c, cfg.LayerNormE)
		bk.MatMul(la.qkv, la.ln1, w.qkvw, w.qkvb, n, c, 3*c)
		if kv != nil {
			bk.KVWrite(kv.layers[l], la.qkv, a.slot, a.pos, n, c)
		}
		if decode {
			bk.AttentionDecode(la.attY, la.qkv, kv.layers[l], a.slot, a.pos, n, nh, c)
		} else {
			bk.Attention(la.attY, la.attLse, la.qkv, a.pack, nh, c)
		}
		bk.MatMul(a.proj, la.attY, w.attprojw, w.attprojb, n, c, c)
		bk.Add(la.res2.Slice(0, n*c), residual.Slice(0, n*c), a.proj.Slice(0, n*c))
		bk.LayerNorm(la.ln2, la.ln2Mean, la.ln2Rstd, la.res2, w.ln2w, w.ln2b, n, c, cfg.LayerNormE)
		bk.MatMul(la.fch, la.ln2, w.fcw, w.fcb, n, c, 4*c)
		bk.GELU(la.fchG.Slice(0, n*4*c), la.fch.Slice(0, n*4*c))
		bk.MatMul(a.proj, la.fchG, w.fcprojw, w.fcprojb, n, 4*c, c)
		bk.Add(la.res3.Slice(0, n*c), la.res2.Slice(0, n*c), a.proj.Slice(0, n*c))
		residual = la.res3
	}
	bk.LayerNorm(a.lnf, a.lnfMean, a.lnfRstd, residual, p.lnfw, p.lnfb, n, c, cfg.LayerNormE)
}

// head computes the tied LM head on the r scored rows and their log-probabilities.
func (m *Model) head(a *activations, n, r int, invTemp float32, entropy bool) {
	bk, c, v := m.B, m.Config.Channels, m.Config.VocabSize
	bk.GatherRows(a.headIn, a.lnf, a.rows.Slice(0, r), c)
	bk.MatMul(a.logits, a.headIn, m.p.wte, backend.Buf{}, r, c, v)
	ent := backend.Buf{}
	if entropy {
		ent = a.ent
	}
	bk.LogProbs(a.lse, a.logp, ent, a.logits, a.targets, r, v, invTemp)
}
