package grpo

import (
	"math"
	"testing"

	"github.com/rookscript/rookscript/engine/rollout"
)

// TestCISPOAndSAPO: the two loss types' per-token terms are TRL's GRPOTrainer's (v1.10.0.dev0,
// _compute_loss), written here in float64:
//
//	cispo: −clamp(ρ, max=ε_high).detach()·A·logp
//	sapo:  −σ(τ(ρ−1))·4/τ·A, τ = sapo_temperature_pos where A > 0, else sapo_temperature_neg
//
// and their gradients in logp are CISPO's −min(ρ, ε_high)·A (the weight held constant) and,
// for SAPO, the finite difference of the term through ρ = e^{logp − old}.
func TestCISPOAndSAPO(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EpsilonHigh = 1.5
	for _, c := range []struct{ x, old, adv float64 }{
		{-1.2, -1.0, 0.7}, {-0.3, -1.1, 0.7}, {-2.0, -0.4, -0.5}, {-0.1, -0.9, -1.3}, {-0.5, -0.5, 0}, {-3, -1, 2},
	} {
		ratio := math.Exp(c.x - c.old)

		cfg.LossType = LossCISPO
		var tl tokenLoss
		surrogate(cfg, ratio, c.adv, c.x, &tl)
		w := math.Min(ratio, cfg.EpsilonHigh)
		if want := -w * c.adv * c.x; math.Abs(tl.pg-want) > 1e-12 {
			t.Errorf("cispo %+v: term %g, want %g", c, tl.pg, want)
		}
		if g := tl.dpgDLogp + tl.dpgDRatio*ratio; math.Abs(g-(-w*c.adv)) > 1e-12 {
			t.Errorf("cispo %+v: ∂/∂logp %g, want %g", c, g, -w*c.adv)
		}
		if tl.clippedHigh != (ratio > cfg.EpsilonHigh && c.adv > 0) {
			t.Errorf("cispo %+v: clipped %v", c, tl.clippedHigh)
		}

		cfg.LossType = LossSAPO
		sapo := func(x float64) float64 {
			tau := cfg.SAPOTemperatureNeg
			if c.adv > 0 {
				tau = cfg.SAPOTemperaturePos
			}
			r := math.Exp(x - c.old)
			return -1 / (1 + math.Exp(-tau*(r-1))) * 4 / tau * c.adv
		}
		surrogate(cfg, ratio, c.adv, c.x, &tl)
		if want := sapo(c.x); math.Abs(tl.pg-want) > 1e-12 {
			t.Errorf("sapo %+v: term %g, want %g", c, tl.pg, want)
		}
		const h = 1e-6
		fd := (sapo(c.x+h) - sapo(c.x-h)) / (2 * h)
		if g := tl.dpgDLogp + tl.dpgDRatio*ratio; math.Abs(g-fd) > 1e-7*math.Max(1, math.Abs(fd)) {
			t.Errorf("sapo %+v: ∂/∂logp %g, finite difference %g", c, g, fd)
		}
	}
	// At ρ = 1 SAPO's gate is σ(0)·4/τ = 2/τ and its slope in ρ is −A (as the unclipped surrogate).
	cfg.LossType = LossSAPO
	var tl tokenLoss
	surrogate(cfg, 1, 0.5, -1, &tl)
	if math.Abs(tl.dpgDRatio-(-0.5)) > 1e-15 {
		t.Errorf("sapo at ρ = 1: slope %g, want −A = −0.5", tl.dpgDRatio)
	}
}

// TestCISPOAndSAPOAggregation: cispo is summed over the minibatch's tokens and divided by their
// count (as dapo; TRL normalises it by num_items_in_batch), sapo averaged per sequence then over
// sequences (as grpo).
func TestCISPOAndSAPOAggregation(t *testing.T) {
	part := []*completion{{keep: true, c: &rollout.Completion{Tokens: make([]int32, 3)}},
		{keep: true, c: &rollout.Completion{Tokens: make([]int32, 5)}}}
	total := totalOf(part)
	cfg := DefaultConfig()
	cfg.LossType = LossCISPO
	if w := minibatchWeights(part, total, cfg, 8); w[0].pg != 1.0/8 || w[1].pg != 1.0/8 {
		t.Errorf("cispo weights %v, want 1/8 each (tokens)", w)
	}
	cfg.LossType = LossSAPO
	if w := minibatchWeights(part, total, cfg, 8); w[0].pg != 1.0/6 || w[1].pg != 1.0/10 {
		t.Errorf("sapo weights %v, want 1/(3·2) and 1/(5·2)", w)
	}
}

// TestEntropyThreshold holds the quantile to torch.quantile's (linear interpolation in
// float32, aten's lerp) on values whose answers are known: the ranks themselves, midpoints,
// the extremes, one value, none.
func TestEntropyThreshold(t *testing.T) {
	vals := []float32{3, 0.5, 2, 1, 4} // sorted: 0.5 1 2 3 4
	for _, c := range []struct {
		rho  float64
		want float32
	}{
		{1, 0.5}, {0, 4}, {0.5, 2}, {0.75, 1}, {0.25, 3}, {0.2, 3.2}, {0.875, 0.75}, {0.9, 0.7},
	} {
		got, ok := entropyThreshold(vals, c.rho)
		if !ok || math.Abs(float64(got-c.want)) > 1e-6 {
			t.Errorf("ρ = %g: threshold %v, want %v", c.rho, got, c.want)
		}
	}
	if got, ok := entropyThreshold([]float32{1.5}, 0.2); !ok || got != 1.5 {
		t.Errorf("one value: %v %v", got, ok)
	}
	if _, ok := entropyThreshold(nil, 0.2); ok {
		t.Error("no values gave a threshold")
	}
}
