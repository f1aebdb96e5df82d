package optim

import (
	"math/rand/v2"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/gpt2"
)

// TestStepBits: a Step, one AdamW call with the tensors that take no decay as spans, gives
// the bits of a call per tensor, biases and LayerNorm with WeightDecay 0 (as updates were
// made before, a call per run of tensors alike), with and without decay_all.
func TestStepBits(t *testing.T) {
	for _, all := range []bool{false, true} {
		cfg := AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.1, DecayAll: all}
		a, b := tinyModel(t, gpt2.RandomParams(tinyConfig, 9)), tinyModel(t, gpt2.RandomParams(tinyConfig, 9))
		oa, err := NewAdamW(a, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ob, err := NewAdamW(b, cfg)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(9, 10))
		for step := 1; step <= 3; step++ {
			g := make([]float32, a.Layout.Total)
			for i := range g {
				g[i] = float32(r.NormFloat64())
			}
			stepWith(oa, g)
			b.B.Upload(b.Grads, g)
			for _, t := range b.Layout.Tensors {
				wd := float32(0)
				if all || t.IsMatrix() {
					wd = float32(cfg.WeightDecay)
				}
				b.B.AdamW(b.Params.Slice(t.Off, t.Size), b.Grads.Slice(t.Off, t.Size), ob.M.Slice(t.Off, t.Size), ob.V.Slice(t.Off, t.Size),
					backend.AdamW{LR: float32(cfg.LR), Beta1: float32(cfg.Beta1), Beta2: float32(cfg.Beta2), Eps: float32(cfg.Eps), WeightDecay: wd, Step: step})
			}
		}
		ma, va := oa.Export()
		mb, vb := ob.Export()
		if !bitsEqual(a.ParamsHost(), b.ParamsHost()) || !bitsEqual(ma, mb) || !bitsEqual(va, vb) {
			t.Fatalf("decay_all %v: one call per update differs from one call per tensor", all)
		}
	}
}
