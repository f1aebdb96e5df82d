package gpt2_test

import (
	"math"
	"testing"

	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/optim"
)

// Golden tests against PyTorch (testdata/gen_fixtures.py): the reference is computed in
// float64 from the same float32 weights, so the differences below are our float32 rounding.
// A float32 evaluation of this 2-layer network carries relative errors of a few 1e-7 per
// value; the tolerances leave about a factor ten above what is observed (stated per check).

func maxDiff(a, b []float32) float64 {
	m := 0.0
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

func maxAbs(a []float32) float64 {
	m := 0.0
	for _, v := range a {
		m = max(m, math.Abs(float64(v)))
	}
	return m
}

func goldenModel(t *testing.T) (*gpt2.Model, *gpt2.Fixture) {
	f := gpt2.LoadFixture(t)
	m, err := gpt2.New(cpu.New(2), f.Config, f.Params)
	if err != nil {
		t.Fatal(err)
	}
	return m, f
}

func TestGoldenLogits(t *testing.T) {
	m, f := goldenModel(t)
	m.HeadRows = 5 // Logits recomputes the head chunk by chunk
	// Score every position so the head returns all N rows of logits.
	b := gpt2.Batch{Tokens: f.Tokens, Lens: f.Lens}
	for i := range f.Tokens {
		b.Rows = append(b.Rows, int32(i))
		b.Targets = append(b.Targets, 0)
	}
	if err := m.Forward(&b, 1, false, &gpt2.Output{}); err != nil {
		t.Fatal(err)
	}
	// Logits are O(0.3) here: 1e-6 absolute is ~3e-6 relative.
	if d := maxDiff(m.Logits(), f.Logits); d > 1e-6 {
		t.Fatalf("logits differ from PyTorch by %g", d)
	}
}

// TestGoldenLossAndGradients: log-probabilities, entropies, the loss and every gradient
// against PyTorch, with the LM head in one chunk, in chunks of 4 rows, and fused
// (ForwardBackward, chunks of 3 rows).
func TestGoldenLossAndGradients(t *testing.T) {
	for _, c := range []struct {
		name     string
		headRows int
		fused    bool
	}{{"one chunk", 0, false}, {"chunks of 4", 4, false}, {"fused, chunks of 3", 3, true}} {
		t.Run(c.name, func(t *testing.T) { goldenGradients(t, c.headRows, c.fused) })
	}
}

func goldenGradients(t *testing.T, headRows int, fused bool) {
	m, f := goldenModel(t)
	m.HeadRows = headRows
	b := gpt2.Batch{Tokens: f.Tokens, Lens: f.Lens, Rows: f.Rows, Targets: f.Targets}
	var out gpt2.Output
	dlogp := make([]float32, len(f.Weights))
	for i := range f.Weights {
		dlogp[i] = -f.Weights[i]
	}
	m.ZeroGrads()
	if fused {
		err := m.ForwardBackward(&b, f.Tau, true, func(lo int, _, _, dl, de []float32) {
			copy(dl, dlogp[lo:])
			copy(de, f.EntWeights[lo:])
		}, &out)
		if err != nil {
			t.Fatal(err)
		}
	} else if err := m.Forward(&b, f.Tau, true, &out); err != nil {
		t.Fatal(err)
	}
	// logp and entropy are O(4): 5e-6 absolute is ~1e-6 relative.
	if d := maxDiff(out.LogP, f.Logp); d > 5e-6 {
		t.Errorf("logp differs from PyTorch by %g", d)
	}
	if d := maxDiff(out.Entropy, f.Entropy); d > 5e-6 {
		t.Errorf("entropy differs from PyTorch by %g", d)
	}
	loss := 0.0
	for i := range f.Weights {
		loss += -float64(f.Weights[i])*float64(out.LogP[i]) + float64(f.EntWeights[i])*float64(out.Entropy[i])
	}
	if math.Abs(loss-float64(f.Loss)) > 1e-5*max(1, math.Abs(float64(f.Loss))) {
		t.Errorf("loss %g, PyTorch %g", loss, f.Loss)
	}
	if !fused {
		if err := m.Backward(dlogp, f.EntWeights); err != nil {
			t.Fatal(err)
		}
	}
	// Every parameter's gradient, each within 1e-5 of the tensor's largest gradient.
	for _, tn := range m.Layout.Tensors {
		g, _ := m.Grad(tn.Name)
		got := make([]float32, tn.Size)
		m.B.Download(got, g)
		want := f.Grads[tn.Name]
		if d := maxDiff(got, want); d > 1e-5*max(1e-2, maxAbs(want)) {
			t.Errorf("%s: gradient differs from PyTorch by %g (max |grad| %g)", tn.Name, d, maxAbs(want))
		}
	}
}

func TestGoldenAdamW(t *testing.T) {
	m, f := goldenModel(t)
	a := f.AdamW
	opt, err := optim.NewAdamW(m, optim.AdamWConfig{LR: a.LR, Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps, WeightDecay: a.WeightDecay})
	if err != nil {
		t.Fatal(err)
	}
	b := gpt2.Batch{Tokens: f.Tokens, Lens: f.Lens, Rows: f.Rows, Targets: f.Targets}
	dlogp := make([]float32, len(f.Weights))
	for i := range dlogp {
		dlogp[i] = -f.Weights[i]
	}
	var out gpt2.Output
	for step := range a.Steps {
		if err := m.Forward(&b, f.Tau, true, &out); err != nil {
			t.Fatal(err)
		}
		loss := 0.0
		for i := range f.Weights {
			loss += -float64(f.Weights[i])*float64(out.LogP[i]) + float64(f.EntWeights[i])*float64(out.Entropy[i])
		}
		if d := math.Abs(loss - float64(f.AdamWLoss[step])); d > 1e-5*max(1, math.Abs(loss)) {
			t.Errorf("step %d: loss %g, PyTorch %g", step, loss, f.AdamWLoss[step])
		}
		m.ZeroGrads()
		if err := m.Backward(dlogp, f.EntWeights); err != nil {
			t.Fatal(err)
		}
		opt.Step(a.LR)
	}
	// AdamW divides the gradient by its own running RMS, so an element whose gradient is tiny
	// (exactly zero for the attention key bias: a constant added to every score of a query
	// changes nothing) turns rounding noise into full ±lr steps. Elements whose first gradient
	// is below 1e-4 of their tensor's largest are therefore only checked to have moved no more
	// than AdamW can (steps·lr); every other parameter must agree to 1e-6.
	params := m.ParamsHost()
	for _, tn := range m.Layout.Tensors {
		got, want, g0 := params[tn.Off:tn.Off+tn.Size], f.AdamWParams[tn.Name], f.Grads[tn.Name]
		small := 1e-4 * maxAbs(g0)
		worst := 0.0
		for i := range got {
			d := math.Abs(float64(got[i]) - float64(want[i]))
			if math.Abs(float64(g0[i])) < small {
				if d > float64(a.Steps)*a.LR*1.001 {
					t.Errorf("%s[%d] (zero gradient) moved %g, more than %d AdamW steps can", tn.Name, i, d, a.Steps)
				}
				continue
			}
			worst = max(worst, d)
		}
		if worst > 1e-6 {
			t.Errorf("%s: parameters after %d AdamW steps differ from PyTorch by %g", tn.Name, a.Steps, worst)
		}
		t.Logf("%s: max |Δ| %.2g", tn.Name, worst)
	}
}
