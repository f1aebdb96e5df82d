package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rookscript/rookscript/engine/gpt2"
)

// TestNormsBits: Norms, one SumSquaresMany call, gives the bits of a SumSquares call per
// tensor added in Layout order (the norms a run logged before, to the bit), and a NaN
// gradient reaches its own layer's norm and the total only.
func TestNormsBits(t *testing.T) {
	m := tinyModel(t, gpt2.RandomParams(tinyConfig, 7))
	r := rand.New(rand.NewPCG(7, 8))
	g := make([]float32, m.Layout.Total)
	for i := range g {
		g[i] = float32(r.NormFloat64())
	}
	perTensor := func() (total float64, layers []float64) {
		layers = make([]float64, m.Config.NumLayers)
		for _, t := range m.Layout.Tensors {
			s := m.B.SumSquares(m.Grads.Slice(t.Off, t.Size))
			total += s
			if t.Layer >= 0 {
				layers[t.Layer] += s
			}
		}
		return math.Sqrt(total), layers
	}
	m.EnsureGrads()
	m.B.Upload(m.Grads, g)
	got := Norms(m)
	total, layers := perTensor()
	if math.Float64bits(got.Total) != math.Float64bits(total) {
		t.Fatalf("total %v, per tensor %v", got.Total, total)
	}
	for i, s := range layers {
		if math.Float64bits(got.Layers[i]) != math.Float64bits(math.Sqrt(s)) {
			t.Fatalf("layer %d: %v, per tensor %v", i, got.Layers[i], math.Sqrt(s))
		}
	}

	fc, _ := m.Layout.Lookup("h.1.mlp.c_fc.weight")
	g[fc.Off+3] = float32(math.NaN())
	m.B.Upload(m.Grads, g)
	got = Norms(m)
	if got.Finite() || !math.IsNaN(got.Layers[1]) || math.IsNaN(got.Layers[0]) || math.IsNaN(got.Named["embed"]) {
		t.Fatalf("a NaN in layer 1: total %v, layers %v, embed %v", got.Total, got.Layers, got.Named["embed"])
	}
}
