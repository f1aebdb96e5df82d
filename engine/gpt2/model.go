package gpt2

import (
	"fmt"

	"github.com/rookscript/rookscript/engine/backend"
)

// Model is a GPT-2 whose parameters, gradients and activations live on one backend.
//
// Parameters and gradients are each one flat buffer in Layout order (llm.c style), with
// named views per tensor. Activations are sized for the largest batch seen so far and
// reused, so steady-state steps allocate nothing. The LM head runs in chunks of HeadRows
// scored rows, so no batch ever holds its rows × V logits at once. A Model is not safe for
// concurrent use.
type Model struct {
	Config Config
	Layout *Layout
	B      backend.Backend

	Params backend.Buf // (Layout.Total)
	Grads  backend.Buf // (Layout.Total); Nil until EnsureGrads
	p, g   weights     // views of Params and Grads

	// HeadRows is the number of scored rows per LM-head chunk; 0 chooses it from
	// HeadChunkBytes. On a batch-invariant backend the forward's results do not depend on it;
	// the tied embedding's gradient sums chunk by chunk, so it depends on it by float rounding.
	// Nothing depends on the thread count.
	HeadRows int

	gen uint64 // writes to Params so far (ParamGeneration)

	act  *activations
	smp  *sampling
	draw *drawings   // draws on the device (DeviceSampler)
	last lastForward // what the most recent training forward left for Backward
}

// weights are per-tensor views of a flat buffer in Layout order.
type weights struct {
	wte, wpe, lnfw, lnfb backend.Buf // (V, C), (maxT, C), (C), (C)
	blocks               []block
}

type block struct {
	ln1w, ln1b backend.Buf // (C)
	qkvw, qkvb backend.Buf // (3C, C), (3C)
	attprojw   backend.Buf // (C, C)
	attprojb   backend.Buf // (C)
	ln2w, ln2b backend.Buf // (C)
	fcw, fcb   backend.Buf // (4C, C), (4C)
	fcprojw    backend.Buf // (C, 4C)
	fcprojb    backend.Buf // (C)
}

func viewsOf(l *Layout, flat backend.Buf) weights {
	get := func(name string) backend.Buf {
		t, ok := l.Lookup(name)
		if !ok {
			panic("gpt2: no tensor " + name)
		}
		return flat.Slice(t.Off, t.Size)
	}
	w := weights{wte: get("wte.weight"), wpe: get("wpe.weight"), lnfw: get("ln_f.weight"), lnfb: get("ln_f.bias")}
	for i := 0; i < l.Config.NumLayers; i++ {
		b := func(g string) backend.Buf { t := l.Block(i, g); return flat.Slice(t.Off, t.Size) }
		w.blocks = append(w.blocks, block{
			ln1w: b("ln_1.weight"), ln1b: b("ln_1.bias"),
			qkvw: b("attn.c_attn.weight"), qkvb: b("attn.c_attn.bias"),
			attprojw: b("attn.c_proj.weight"), attprojb: b("attn.c_proj.bias"),
			ln2w: b("ln_2.weight"), ln2b: b("ln_2.bias"),
			fcw: b("mlp.c_fc.weight"), fcb: b("mlp.c_fc.bias"),
			fcprojw: b("mlp.c_proj.weight"), fcprojb: b("mlp.c_proj.bias"),
		})
	}
	return w
}

// New places a model with the given parameters (Layout order, as the loaders return them)
// on backend b.
func New(b backend.Backend, cfg Config, params []float32) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := NewLayout(cfg)
	if len(params) != l.Total {
		return nil, fmt.Errorf("gpt2: %d parameters given, the configuration needs %d", len(params), l.Total)
	}
	m := &Model{Config: cfg, Layout: l, B: b, Params: b.Alloc(l.Total)}
	b.Upload(m.Params, params)
	m.p = viewsOf(l, m.Params)
	return m, nil
}

// EnsureGrads allocates the gradient buffer (zeroed) if the model has none yet.
func (m *Model) EnsureGrads() {
	if m.Grads.Nil() {
		m.Grads = m.B.Alloc(m.Layout.Total)
		m.g = viewsOf(m.Layout, m.Grads)
	}
}

// ZeroGrads sets every gradient to zero.
func (m *Model) ZeroGrads() {
	m.EnsureGrads()
	m.B.Fill(m.Grads, 0)
}

// ParamsHost copies the parameters to the host, in Layout order.
func (m *Model) ParamsHost() []float32 {
	out := make([]float32, m.Layout.Total)
	m.B.Download(out, m.Params)
	return out
}

// GradsHost copies the gradients to the host, in Layout order.
func (m *Model) GradsHost() []float32 {
	m.EnsureGrads()
	out := make([]float32, m.Layout.Total)
	m.B.Download(out, m.Grads)
	return out
}

// SetParams overwrites the parameters from a host slice in Layout order.
func (m *Model) SetParams(params []float32) error {
	if len(params) != m.Layout.Total {
		return fmt.Errorf("gpt2: %d parameters given, the model has %d", len(params), m.Layout.Total)
	}
	m.B.Upload(m.Params, params)
	m.gen++
	return nil
}

// ParamGeneration counts the writes to the parameters: SetParams, and every write that says so
// with ParamsWritten (an optimizer step). Equal generations of one model mean equal weights;
// a reference check or a sampled batch compares them instead of hashing the weights.
func (m *Model) ParamGeneration() uint64 { return m.gen }

// ParamsWritten records a write to Params made other than through SetParams: a caller that
// writes them (an optimizer, a Tensor view) calls it after.
func (m *Model) ParamsWritten() { m.gen++ }

// Tensor returns the view of the named parameter tensor (see Layout for names). A caller that
// writes through it calls ParamsWritten after.
func (m *Model) Tensor(name string) (backend.Buf, bool) {
	t, ok := m.Layout.Lookup(name)
	if !ok {
		return backend.Buf{}, false
	}
	return m.Params.Slice(t.Off, t.Size), true
}

// Grad returns the view of the gradient of the named tensor.
func (m *Model) Grad(name string) (backend.Buf, bool) {
	t, ok := m.Layout.Lookup(name)
	if !ok {
		return backend.Buf{}, false
	}
	m.EnsureGrads()
	return m.Grads.Slice(t.Off, t.Size), true
}

// BatchInvariant reports whether the model's backend computes every log-probability with
// sums whose order depends only on that row's own inputs (a backend that says so with a
// BatchInvariant method: the CPU's): then the sampler's recorded logprobs are the training
// and reference forwards' bit for bit, and the GRPO ratio before the first update is exactly
// 1 (DESIGN §6.1). Otherwise they agree to float rounding.
func (m *Model) BatchInvariant() bool {
	b, ok := m.B.(interface{ BatchInvariant() bool })
	return ok && b.BatchInvariant()
}
