package grpo

import "math"

// tokenLoss is one token's loss terms and their derivatives.
type tokenLoss struct {
	pg, kl      float64 // −min(ρA, clip(ρ)A) and the KL estimate
	dpgDRatio   float64 // ∂pg/∂ρ
	dpgDLogp    float64 // ∂pg/∂logp_θ taken directly (cispo, whose ρ is held constant)
	dklDLogp    float64 // ∂KL/∂logp_θ
	clippedLow  bool    // ρ < 1−ε_low with A < 0: the clip holds the update back
	clippedHigh bool    // ρ > 1+ε_high with A > 0
	klClamped   bool    // the KL estimate was bounded by kl_clamp
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

// surrogate is the policy term of cfg's loss type for one token: the clipped surrogate, or
// CISPO's −sg(min(ρ, ε_high))·A·x (x = logp_θ; ρ held constant, so its gradient is direct), or
// SAPO's −σ(τ(ρ−1))·4/τ·A, whose derivative in ρ is −4σ(1−σ)·A.
func surrogate(cfg Config, ratio, adv, x float64, t *tokenLoss) {
	t.dpgDLogp = 0
	switch cfg.LossType {
	case LossCISPO:
		c := min(ratio, cfg.EpsilonHi())
		t.pg, t.dpgDRatio, t.dpgDLogp = -c*adv*x, 0, -c*adv
		t.clippedLow, t.clippedHigh = false, ratio > cfg.EpsilonHi() && adv > 0
	case LossSAPO:
		tau := cfg.SAPOTemperatureNeg
		if adv > 0 {
			tau = cfg.SAPOTemperaturePos
		}
		s := 1 / (1 + math.Exp(-tau*(ratio-1)))
		t.pg, t.dpgDRatio = -s*4/tau*adv, -4*s*(1-s)*adv
		t.clippedLow, t.clippedHigh = false, false
	default:
		policyLoss(ratio, adv, cfg.Epsilon, cfg.EpsilonHi(), t)
	}
}

// klTerm is the KL(π_θ‖π_ref) estimate of one token and its derivative in logp_θ, for
// x = logp_θ and r = logp_ref, bounded to [−clamp, clamp] when clamp > 0 (a constant there:
// no gradient).
func klTerm(estimator KLEstimator, clamp, x, r float64, t *tokenLoss) {
	d := r - x
	switch estimator {
	case KLK1:
		t.kl, t.dklDLogp = -d, 1
	case KLK2:
		t.kl, t.dklDLogp = 0.5*d*d, -d
	default: // k3
		e := math.Exp(d)
		t.kl, t.dklDLogp = e-d-1, 1-e
	}
	t.klClamped = clamp > 0 && (t.kl > clamp || t.kl < -clamp)
	if t.klClamped {
		t.kl, t.dklDLogp = min(max(t.kl, -clamp), clamp), 0
	}
}

// weights are one completion's share of its minibatch's loss: every token's policy and KL
// terms count pg times, its entropy term ent times.
type weights struct{ pg, ent float64 }

// sequenceTokens are one completion's per-token numbers: log-probabilities under the policy
// being trained, at sampling time (old), under the reference (nil when β = 0), the policy's
// entropies, and the advantages when a recipe set them per token (nil: the completion's one).
// high marks the tokens that carry the policy and entropy terms under top_entropy_quantile
// (nil: every token).
type sequenceTokens struct {
	logp, old, ref, entropy []float32
	adv                     []float64
	high                    []bool
}

// at is token t's advantage: its own, or the completion's.
func (s sequenceTokens) at(t int, adv float64) float64 {
	if s.adv != nil {
		return s.adv[t]
	}
	return adv
}

// sequenceLoss adds one completion's terms to st and writes ∂L/∂logp and ∂L/∂H of its tokens
// into dlogp and dent. The loss of the completion is
//
//	Σ_t w.pg·(m_t·(−min(ρ_t A, clip(ρ_t)A)) + β·KL_t) − c_H·w.ent·m_t·H_t
//
// with ρ_t the token's ratio, or the sequence's exp(mean_t log ρ_t) at the sequence level,
// and m_t 1 for a token that carries the policy term (all of them unless s.high says).
func sequenceLoss(cfg Config, s sequenceTokens, adv float64, w weights, st *stats, dlogp, dent []float32) {
	n := len(s.logp)
	sequence := cfg.ImportanceSamplingLevel == LevelSequence
	seqRatio := 0.0
	if sequence {
		for t := range n {
			seqRatio += float64(s.logp[t]) - float64(s.old[t])
		}
		seqRatio = math.Exp(seqRatio / float64(n))
	}
	var tl tokenLoss
	seqGrad := 0.0 // sequence level: Σ_t w·∂pg/∂s
	for t := range n {
		x := float64(s.logp[t])
		logRatio := x - float64(s.old[t])
		ratio := math.Exp(logRatio)
		if sequence {
			ratio = seqRatio
		}
		surrogate(cfg, ratio, s.at(t, adv), x, &tl)
		tl.kl, tl.dklDLogp, tl.klClamped = 0, 0, false
		if cfg.Beta > 0 {
			klTerm(cfg.KLEstimator, cfg.KLClamp, x, float64(s.ref[t]), &tl)
		}
		h, m := float64(s.entropy[t]), 1.0
		if s.high != nil && !s.high[t] {
			m = 0
		}
		st.loss += w.pg*(m*tl.pg+cfg.Beta*tl.kl) - cfg.EntropyCoef*w.ent*m*h
		st.pgLoss += w.pg * m * tl.pg
		st.klLoss += w.pg * cfg.Beta * tl.kl
		st.ent += w.ent * m * h
		st.add(ratio, logRatio, tl, h, cfg.Beta > 0)

		g := cfg.Beta*tl.dklDLogp + m*tl.dpgDLogp
		if sequence {
			seqGrad += w.pg * m * tl.dpgDRatio
		} else {
			g += m * tl.dpgDRatio * ratio // ∂ρ/∂logp = ρ
		}
		dlogp[t] = float32(w.pg * g)
		dent[t] = float32(-cfg.EntropyCoef * w.ent * m)
	}
	if sequence {
		// ∂s/∂logp_t = s/|o| for every token of the sequence.
		d := seqGrad * seqRatio / float64(n)
		for t := range n {
			dlogp[t] += float32(d)
		}
	}
}

// minibatchWeights gives each completion of a minibatch its share of the loss. part is what
// the sequence counts of grpo and dr_grpo count: the completions that are trained on and,
// with MaskedInDenominator, the masked ones too (keep false). Token counts (dapo, bnpo, the
// token-mean entropy) count only the tokens trained on, as TRL's num_items_in_batch does
// since huggingface/trl#6439. maxNew is the rollout's max_new_tokens (dr_grpo's constant).
// total.selected, when top_entropy_quantile selected tokens, is how many it did.
func minibatchWeights(part []*completion, total minibatchTotal, cfg Config, maxNew int) []weights {
	seqs, kept := total.seqs, total.keptTokens // the whole minibatch's, over every rank's share
	w := make([]weights, len(part))
	for i, k := range part {
		switch cfg.LossType {
		case LossGRPO, LossSAPO:
			w[i].pg = 1 / float64(len(k.c.Tokens)*seqs)
		case LossDAPO, LossBNPO, LossCISPO:
			w[i].pg = 1 / float64(kept)
		case LossDrGRPO:
			w[i].pg = 1 / float64(seqs*maxNew)
		}
		w[i].ent = w[i].pg
		if cfg.EntropyAggregation == EntropyTokenMean {
			// TRL's: dapo and cispo divide by the tokens trained on, the others by the tokens
			// the entropy term covers (those top_entropy_quantile selects, or all of them).
			w[i].ent = 1 / float64(kept)
			if total.selected > 0 && cfg.LossType != LossDAPO && cfg.LossType != LossCISPO {
				w[i].ent = 1 / float64(total.selected)
			}
		}
	}
	return w
}

// totalOf is what a minibatch of part alone (one rank's whole batch) counts.
func totalOf(part []*completion) minibatchTotal {
	t := minibatchTotal{seqs: len(part)}
	for _, k := range part {
		if k.keep {
			t.keptTokens += len(k.c.Tokens)
			t.trained++
		}
	}
	return t
}
