package grpo

import "math"

// tinkerLoss adds one completion's terms of one of Tinker's losses to st and writes their
// ∂L/∂logp. Each is a sum over tokens (Tinker's loss:sum), with x = logp_θ, q = the sampler's
// logp, ρ = e^{x−q}, A the token's advantage and lo, hi the clip thresholds:
//
//	importance_sampling  −ρA
//	ppo                  −min(ρA, clip(ρ, lo, hi)A)
//	cispo                −sg(clip(ρ, lo, hi))·x·A
//	dro                  −(x·A − ½β(x − q)²)
//	cross_entropy        −A·x   (A as Tinker's weights)
func tinkerLoss(l Loss, s sequenceTokens, adv float64, st *stats, dlogp []float32) {
	lo, hi, beta := l.Tinker.ClipLowThreshold, l.Tinker.ClipHighThreshold, l.Tinker.Beta
	for t := range s.logp {
		x, q, a := float64(s.logp[t]), float64(s.old[t]), s.at(t, adv)
		logRatio := x - q
		ratio := math.Exp(logRatio)
		clipped := min(max(ratio, lo), hi)
		var tl tokenLoss
		var d float64
		switch l.Name {
		case LossImportanceSampling:
			tl.pg, d = -ratio*a, -a*ratio
		case LossPPO:
			if u, c := ratio*a, clipped*a; u <= c {
				tl.pg, d = -u, -a*ratio
			} else {
				tl.pg = -c
			}
		case LossTinkerCISPO:
			tl.pg, d = -clipped*x*a, -clipped*a
		case LossDRO:
			tl.pg, d = -(x*a - 0.5*beta*logRatio*logRatio), -(a - beta*logRatio)
		case LossCrossEntropy:
			tl.pg, d = -a*x, -a
		}
		if l.Name == LossPPO || l.Name == LossTinkerCISPO {
			tl.clippedLow, tl.clippedHigh = ratio < lo && a < 0, ratio > hi && a > 0
		}
		h := 0.0
		if s.entropy != nil {
			h = float64(s.entropy[t])
		}
		st.loss += tl.pg
		st.pgLoss += tl.pg
		st.add(ratio, logRatio, tl, h, false)
		dlogp[t] = float32(d)
	}
}
