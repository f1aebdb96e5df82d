package gpt2

import (
	"errors"
	"fmt"
	"slices"

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
	a, err := m.forward(b, temperature, true)
	if err != nil {
		return err
	}
	n, r := len(b.Tokens), len(b.Rows)
	m.heads(a, r, 1/temperature, entropy, nil)
	m.last = lastForward{valid: true, n: n, r: r, entropy: entropy, invTemp: 1 / temperature}
	m.outputs(a, r, entropy, out)
	return nil
}

// Score is Forward for a batch that will not be differentiated (a reference model, an
// evaluation): the same numbers, bit for bit, but every layer runs through one layer's
// buffers and nothing is kept for a backward, so a model that only scores holds a fraction
// of a training model's activations.
func (m *Model) Score(b *Batch, temperature float32, entropy bool, out *Output) error {
	a, err := m.forward(b, temperature, false)
	if err != nil {
		return err
	}
	r := len(b.Rows)
	m.heads(a, r, 1/temperature, entropy, nil)
	m.outputs(a, r, entropy, out)
	return nil
}

// RowGrad gives the loss's gradient for a chunk of scored rows while ForwardBackward runs:
// rows lo .. lo+len(logp)-1 have just been computed (logp, and ent when the forward computes
// entropy, else nil); it writes ∂L/∂logp into dlogp and, when ent is not nil, ∂L/∂H into
// dent (both arrive zeroed). Chunks arrive in row order, each row once. A chunk whose dent
// is zero on every row has no entropy term: its gradient is computed as Backward's with a
// nil dent, so a loss may read the entropy without differentiating it.
type RowGrad func(lo int, logp, ent, dlogp, dent []float32)

// ForwardBackward is Forward followed by Backward in one pass, for losses whose gradient with
// respect to a row's log-probability depends on that row alone (cross-entropy, token-level
// policy gradients): grad gives it chunk by chunk, and each chunk of LM-head logits turns
// into its gradient while it is still in memory — the fused linear cross-entropy of
// Liger-Kernel. Backward after Forward recomputes each chunk's logits instead; this path
// saves that product. Gradients accumulate into Grads as Backward's do.
func (m *Model) ForwardBackward(b *Batch, temperature float32, entropy bool, grad RowGrad, out *Output) error {
	if grad == nil {
		return errors.New("gpt2: ForwardBackward needs a row gradient")
	}
	a, err := m.forward(b, temperature, true)
	if err != nil {
		return err
	}
	n, r := len(b.Tokens), len(b.Rows)
	m.EnsureGrads()
	m.ensureBackward(a)
	m.B.Fill(a.dln.Slice(0, n*m.Config.Channels), 0)
	m.heads(a, r, 1/temperature, entropy, grad)
	m.outputs(a, r, entropy, out)
	m.last.valid = false
	m.trunkBackward(a, n)
	return nil
}

// forward validates the batch, uploads it and runs the trunk, keeping every layer's
// activations when train is set.
func (m *Model) forward(b *Batch, temperature float32, train bool) (*activations, error) {
	if err := b.Validate(m.Config); err != nil {
		return nil, err
	}
	if !(temperature > 0) {
		return nil, fmt.Errorf("gpt2: temperature must be positive, got %g", temperature)
	}
	n, r := len(b.Tokens), len(b.Rows)
	a := m.ensureActs(n, r, train)
	m.last.valid = false
	m.upload(a, b)
	m.trunk(a, n, nil, false, train)
	return a, nil
}

// outputs downloads the scored rows' log-probabilities (and entropies) into out.
func (m *Model) outputs(a *activations, r int, entropy bool, out *Output) {
	out.LogP = resize(out.LogP, r)
	m.B.Download(out.LogP, a.logp.Slice(0, r))
	out.Entropy = out.Entropy[:0]
	if entropy {
		out.Entropy = resize(out.Entropy, r)
		m.B.Download(out.Entropy, a.ent.Slice(0, r))
	}
}

// resize returns s with length n, reusing its storage when it is large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// Logits returns the raw logits (temperature 1) of the scored rows of the last Forward,
// row-major (r, V), recomputed chunk by chunk from the saved head input: r × V floats, meant
// for tests and inspection. Empty after Backward.
func (m *Model) Logits() []float32 {
	r, v := m.last.r, m.Config.VocabSize
	out := make([]float32, r*v)
	if !m.last.valid || r == 0 {
		return out
	}
	a := m.act
	size := a.chunkRows(r)
	for lo := 0; lo < r; lo += size {
		rows := min(size, r-lo)
		logits := a.logits.Slice(0, rows*v)
		m.headLogits(a, logits, lo, rows)
		m.B.Download(out[lo*v:(lo+rows)*v], logits)
	}
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
// then attend over their slot of the cache instead of over the packed batch. Unless save is
// set, every block runs through the first layer's buffers: the residual stream stays in its
// res3, which each block reads (LayerNorm, residual add) before it overwrites it.
func (m *Model) trunk(a *activations, n int, kv *KVCache, decode, save bool) {
	bk, cfg, p := m.B, m.Config, m.p
	c, nh := cfg.Channels, cfg.NumHeads
	bk.Encoder(a.encoded, a.tok, a.pos, p.wte, p.wpe, n, c)
	residual := a.encoded
	for l := range cfg.NumLayers {
		w, la := p.blocks[l], &a.layers[0]
		if save {
			la = &a.layers[l]
		}
		bk.LayerNorm(la.ln1, la.ln1Mean, la.ln1Rstd, residual, w.ln1w, w.ln1b, n, c, cfg.LayerNormE)
		bk.MatMul(la.qkv, la.ln1, w.qkvw, w.qkvb, n, c, 3*c)
		if decode { // its keys and values into the cache, and attention over the cache
			bk.AttentionDecode(la.attY, la.qkv, kv.layers[l], a.slot, a.pos, n, nh, c)
		} else {
			if kv != nil {
				bk.KVWrite(kv.layers[l], la.qkv, a.slot, a.pos, n, c)
			}
			bk.Attention(la.attY, la.attLse, la.qkv, a.pack, nh, c)
		}
		bk.MatMulAdd(la.res2, residual, la.attY, w.attprojw, w.attprojb, n, c, c)
		bk.LayerNorm(la.ln2, la.ln2Mean, la.ln2Rstd, la.res2, w.ln2w, w.ln2b, n, c, cfg.LayerNormE)
		bk.MatMulGELU(la.fch, la.fchG, la.ln2, w.fcw, w.fcb, n, c, 4*c)
		bk.MatMulAdd(la.res3, la.res2, la.fchG, w.fcprojw, w.fcprojb, n, 4*c, c)
		residual = la.res3
	}
	bk.LayerNorm(a.lnf, a.lnfMean, a.lnfRstd, residual, p.lnfw, p.lnfb, n, c, cfg.LayerNormE)
}

// heads runs the tied LM head over the r scored rows in chunks of up to a.headRows: for each
// chunk the logits (rows × V, the only place they exist), then the log-probabilities of the
// targets (and entropies). With grad (ForwardBackward), each chunk's logits then become their
// gradient in place and flow into the tied embedding's gradient and into the final
// LayerNorm's output gradient a.dln, before the next chunk overwrites them.
func (m *Model) heads(a *activations, r int, invTemp float32, entropy bool, grad RowGrad) {
	if r == 0 {
		return
	}
	bk, c, v := m.B, m.Config.Channels, m.Config.VocabSize
	bk.GatherRows(a.headIn, a.lnf, a.rows.Slice(0, r), c)
	size := a.chunkRows(r)
	for lo := 0; lo < r; lo += size {
		rows := min(size, r-lo)
		logits := a.logits.Slice(0, rows*v)
		m.headLogits(a, logits, lo, rows)
		ent := backend.Buf{}
		if entropy {
			ent = a.ent.Slice(lo, rows)
		}
		bk.LogProbs(a.lse.Slice(lo, rows), a.logp.Slice(lo, rows), ent, logits, a.targets.Slice(lo, rows), rows, v, invTemp)
		if grad == nil {
			continue
		}
		dlogp, dent := m.rowGrads(a, grad, lo, rows, entropy)
		m.headBackward(a, logits, lo, rows, invTemp, dlogp, dent)
	}
}

// headLogits computes the raw logits of scored rows lo .. lo+rows-1 into logits.
func (m *Model) headLogits(a *activations, logits backend.Buf, lo, rows int) {
	c := m.Config.Channels
	m.B.MatMul(logits, a.headIn.Slice(lo*c, rows*c), m.p.wte, backend.Buf{}, rows, c, m.Config.VocabSize)
}

// rowGrads asks grad for the gradient of a chunk of rows and uploads it into a.dlogp and
// a.dent; it returns the chunk's views of them (dent Nil without entropy).
func (m *Model) rowGrads(a *activations, grad RowGrad, lo, rows int, entropy bool) (dlogp, dent backend.Buf) {
	if cap(a.hostGrad) < 4*rows {
		a.hostGrad = make([]float32, 4*a.headRows)
	}
	h := a.hostGrad[:4*rows]
	logp, ent, dl, de := h[:rows], h[rows:2*rows], h[2*rows:3*rows], h[3*rows:]
	m.B.Download(logp, a.logp.Slice(lo, rows))
	clear(dl)
	dlogp = a.dlogp.Slice(lo, rows)
	if !entropy {
		grad(lo, logp, nil, dl, nil)
		m.B.Upload(dlogp, dl)
		return dlogp, backend.Buf{}
	}
	m.B.Download(ent, a.ent.Slice(lo, rows))
	clear(de)
	grad(lo, logp, ent, dl, de)
	m.B.Upload(dlogp, dl)
	if !slices.ContainsFunc(de, func(x float32) bool { return x != 0 }) {
		return dlogp, backend.Buf{}
	}
	dent = a.dent.Slice(lo, rows)
	m.B.Upload(dent, de)
	return dlogp, dent
}
