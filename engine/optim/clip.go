package optim

import (
	"fmt"
	"math"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/gpt2"
)

// GradNorms are the L2 norms of a model's gradient before clipping.
type GradNorms struct {
	Total  float64            // over every parameter; NaN or Inf if any gradient is
	Layers []float64          // per transformer block
	Named  map[string]float64 // "embed" (wte, wpe), "ln_f", and "layer.N" (same as Layers)
}

// Finite reports whether every gradient element is finite.
func (g GradNorms) Finite() bool { return !math.IsNaN(g.Total) && !math.IsInf(g.Total, 0) }

// Norms computes the gradient norms of m, per tensor and summed in Layout order (a fixed
// order, so the result is deterministic). The tensors' sums of squares come from one backend
// call: on a device, one reduction and one copy to the host per update, not one a tensor.
func Norms(m *gpt2.Model) GradNorms {
	m.EnsureGrads()
	cfg := m.Config
	spans := make([]backend.Span, len(m.Layout.Tensors))
	for i, t := range m.Layout.Tensors {
		spans[i] = backend.Span{Off: t.Off, N: t.Size}
	}
	sums := make([]float64, len(spans))
	m.B.SumSquaresMany(m.Grads, spans, sums)
	sq := make([]float64, cfg.NumLayers)
	var embed, lnf, total float64
	for i, t := range m.Layout.Tensors {
		s := sums[i]
		total += s
		switch {
		case t.Layer >= 0:
			sq[t.Layer] += s
		case t.Name == "ln_f.weight" || t.Name == "ln_f.bias":
			lnf += s
		default:
			embed += s
		}
	}
	g := GradNorms{Total: math.Sqrt(total), Layers: make([]float64, cfg.NumLayers), Named: map[string]float64{}}
	for i, s := range sq {
		g.Layers[i] = math.Sqrt(s)
		g.Named[fmt.Sprintf("layer.%d", i)] = g.Layers[i]
	}
	g.Named["embed"], g.Named["ln_f"] = math.Sqrt(embed), math.Sqrt(lnf)
	return g
}

// ClipScale is the factor that brings a gradient of norm total down to maxNorm (1 when it
// is already within, or when maxNorm ≤ 0 disables clipping), as torch's clip_grad_norm_.
func ClipScale(total, maxNorm float64) float64 {
	if maxNorm <= 0 || total <= maxNorm {
		return 1
	}
	return maxNorm / (total + 1e-6)
}

// Clip scales m's gradient so its global norm is at most maxNorm and returns the scale.
func Clip(m *gpt2.Model, total, maxNorm float64) float64 {
	s := ClipScale(total, maxNorm)
	if s != 1 {
		m.B.Scale(m.Grads, float32(s))
	}
	return s
}
