package grpo

import "math"

// tokenLoss is one token's loss terms and their derivatives.
type tokenLoss struct {
	pg, kl      float64 // −min(ρA, clip(ρ)A) and the KL estimate
	dpgDRatio   float64 // ∂pg/∂ρ
	dklDLogp    float64 // ∂KL/∂logp_θ
	clippedLow  bool    // ρ < 1−ε_low with A < 0: the clip holds the update back
	clippedHigh bool    // ρ > 1+ε_high with A > 0
}

// policyLoss is the clipped surrogate −min(ρA, clip(ρ, 1−εl, 1+εh)A) and its derivative in ρ:
// −A where the unclipped term is the minimum, 0 where the clip is active.
func policyLoss(ratio, adv, clipLow, clipHigh float64, t *tokenLoss) {
	clipped := min(max(ratio, 1-clipLow), 1+clipHigh)
	u, c := ratio*adv, clipped*adv
	if u <= c {
		t.pg, t.dpgDRatio = -u, -adv
	} else {
		t.pg, t.dpgDRatio = -c, 0
	}
	t.clippedLow = ratio < 1-clipLow && adv < 0
	t.clippedHigh = ratio > 1+clipHigh && adv > 0
}

// klTerm is the KL(π_θ‖π_ref) estimate of one token and its derivative in logp_θ, for
// x = logp_θ and r = logp_ref.
func klTerm(estimator string, x, r float64, t *tokenLoss) {
	d := r - x
	switch estimator {
	case "k1":
		t.kl, t.dklDLogp = -d, 1
	case "k2":
		t.kl, t.dklDLogp = 0.5*d*d, -d
	default: // k3
		e := math.Exp(d)
		t.kl, t.dklDLogp = e-d-1, 1-e
	}
}
