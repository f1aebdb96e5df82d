package optim

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
)

// tinyConfig is the tests' tiny model, narrower and with a short context: the optimizer's
// tests run no sequences.
var tinyConfig = func() gpt2.Config {
	c := gpt2test.Tiny()
	c.MaxSeqLen, c.Channels = 8, 8
	return c
}()

func tinyModel(t *testing.T, params []float32) *gpt2.Model {
	t.Helper()
	return gpt2test.New(t, cpu.New(1), tinyConfig, params)
}

// stepWith applies one update from the given host gradient.
func stepWith(o *AdamW, grad []float32) {
	o.model.EnsureGrads()
	o.model.B.Upload(o.model.Grads, grad)
	o.Step(o.Config.LR)
}

func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// TestAdamWExportRestore: an optimizer rebuilt from Export continues bit-identically, and
// one rebuilt without its moments does not (so the comparison can fail).
func TestAdamWExportRestore(t *testing.T) {
	cfg := AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.1}
	r := rand.New(rand.NewPCG(1, 2))
	grads := make([][]float32, 5)
	for i := range grads {
		grads[i] = make([]float32, gpt2.NewLayout(tinyConfig).Total)
		for j := range grads[i] {
			grads[i][j] = float32(r.NormFloat64())
		}
	}
	a := tinyModel(t, gpt2.RandomParams(tinyConfig, 3))
	oa, err := NewAdamW(a, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range grads[:3] {
		stepWith(oa, g)
	}
	m, v := oa.Export()
	if oa.Steps != 3 {
		t.Fatalf("steps = %d, want 3", oa.Steps)
	}

	b := tinyModel(t, a.ParamsHost())
	ob, err := NewAdamW(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ob.Restore(m, v, oa.Steps); err != nil {
		t.Fatal(err)
	}
	m[0], v[0] = 1e9, 1e9 // Restore must have copied: the host slices are the caller's
	fresh := tinyModel(t, a.ParamsHost())
	of, err := NewAdamW(fresh, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range grads[3:] {
		stepWith(oa, g)
		stepWith(ob, g)
		stepWith(of, g)
	}
	if !bitsEqual(a.ParamsHost(), b.ParamsHost()) {
		t.Fatal("restored optimizer diverged from the original")
	}
	if bitsEqual(a.ParamsHost(), fresh.ParamsHost()) {
		t.Fatal("an optimizer without its moments gave the same weights: the test cannot tell restore from no restore")
	}
	ma, va := oa.Export()
	mb, vb := ob.Export()
	if !bitsEqual(ma, mb) || !bitsEqual(va, vb) || oa.Steps != ob.Steps {
		t.Fatal("moments or steps differ after continuing")
	}
}

func TestAdamWRestoreChecksSizes(t *testing.T) {
	m := tinyModel(t, gpt2.RandomParams(tinyConfig, 1))
	o, err := NewAdamW(m, DefaultAdamW())
	if err != nil {
		t.Fatal(err)
	}
	n := m.Layout.Total
	for _, c := range []struct {
		m, v  int
		steps int
		want  RestoreError
	}{
		{n - 1, n, 0, RestoreError{What: "first-moment", Got: n - 1, Want: n}},
		{n, n + 1, 0, RestoreError{What: "second-moment", Got: n + 1, Want: n}},
		{n, n, -1, RestoreError{What: "steps", Got: -1}},
	} {
		err := o.Restore(make([]float32, c.m), make([]float32, c.v), c.steps)
		var re *RestoreError
		if !errors.As(err, &re) || *re != c.want {
			t.Errorf("Restore(%d, %d, %d) = %v, want %+v", c.m, c.v, c.steps, err, c.want)
		}
	}
	if o.Steps != 0 {
		t.Errorf("a refused restore changed steps to %d", o.Steps)
	}
}
