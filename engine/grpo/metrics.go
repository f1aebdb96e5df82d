package grpo

import (
	"math"

	"github.com/rookscript/rookscript/engine/rollout"
)

// samplingMetrics records how the batch was sampled: what was drawn may differ from the
// softmax(logits/T) its logprobs are of (DESIGN §5).
func samplingMetrics(m Metrics, b *rollout.Batch) {
	s := b.Shaping
	m["sampling/temperature"] = float64(b.Temperature)
	m["sampling/top_k"], m["sampling/top_p"] = float64(s.TopK), s.TopP
	m["sampling/greedy"] = 0
	if s.Greedy {
		m["sampling/greedy"] = 1
	}
}

func rewardMetrics(m Metrics, b *rollout.Batch, zeroStd []bool, cfg Config) {
	m["reward"], m["reward_std"] = mean(b.Rewards), std(b.Rewards, cfg.StdDDOF)
	zero := 0
	for _, z := range zeroStd {
		if z {
			zero++
		}
	}
	m["frac_reward_zero_std"] = float64(zero) / float64(len(zeroStd))
	// A component may not apply to every completion (NaN there: a policy-task component of
	// an environment-task answer); its mean covers the completions it applies to.
	for name, v := range b.Components {
		sum, n := 0.0, 0
		for _, x := range v {
			if !math.IsNaN(x) {
				sum, n = sum+x, n+1
			}
		}
		if n > 0 && len(v) == len(b.Rewards) {
			m["rewards/"+name+"/mean"] = sum / float64(n)
		}
	}
}

// report writes the update phase's metrics: losses averaged over the minibatches run,
// gradient norms over the updates applied, token statistics.
func (u *updates) report(m Metrics, cfg Config) {
	m["updates"], m["skipped"] = float64(u.applied), float64(u.skipped)
	if u.skipped > 0 {
		m["finite"] = 0
		if u.nonfiniteGrad > 0 {
			m["nonfinite_grad"] = float64(u.nonfiniteGrad)
		}
		if u.nonfiniteLoss > 0 {
			m["nonfinite_loss"] = float64(u.nonfiniteLoss)
		}
	}
	if u.passes > 0 {
		p := float64(u.passes)
		m["loss"], m["pg_loss"], m["kl_loss"], m["entropy_loss"] = u.lossSum/p, u.pgSum/p, u.klSum/p, u.entSum/p
	}
	if u.applied > 0 {
		a := float64(u.applied)
		m["grad_norm"], m["grad_norm/max"] = u.normSum/a, u.normMax
		for k, v := range u.layerNorms {
			m["grad_norm/"+k] = v / a
		}
	}
	st := u.st
	if st.n == 0 {
		return
	}
	n := float64(st.n)
	mu := st.ratioSum / n
	m["ratio/mean"], m["ratio/std"] = mu, math.Sqrt(max(0, st.ratioSq/n-mu*mu))
	m["ratio/min"], m["ratio/max"] = st.ratioMin, st.ratioMax
	m["clip_ratio/low_mean"], m["clip_ratio/high_mean"] = float64(st.clipLow)/n, float64(st.clipHigh)/n
	m["clip_ratio/region_mean"] = float64(st.clipLow+st.clipHigh) / n
	m["entropy"] = st.entSum / n
	maskMetrics(m, st)
	if cfg.Beta > 0 {
		m["kl"], m["kl/max"] = st.klSum/n, st.klMax
		if cfg.KLClamp > 0 {
			m["kl/clamped_ratio"] = float64(st.klClamped) / n
		}
	}
	// DESIGN §6.1 as a runtime check: before the first update the ratio is 1 (|log ρ| ~ 1e-6)
	// and, with the reference equal to the initial policy, the KL is 0. Measured on the first
	// minibatch that ran, which always precedes the first update.
	if u.haveFirst {
		m["ratio/first_max_abs_log"] = u.first.maxAbsLogRatio
		if cfg.Beta > 0 {
			m["kl/first_max"] = u.first.klMax
		}
	}
}

func lengthMetrics(m Metrics, b *rollout.Batch) {
	sum, lo, hi, trunc := 0, math.MaxInt, 0, 0
	for _, c := range b.Completions {
		l := len(c.Tokens)
		sum, lo, hi = sum+l, min(lo, l), max(hi, l)
		if c.Truncated {
			trunc++
		}
	}
	n := float64(len(b.Completions))
	m["completions/mean_length"], m["completions/min_length"], m["completions/max_length"] = float64(sum)/n, float64(lo), float64(hi)
	m["completions/clipped_ratio"] = float64(trunc) / n
}

// maskMetrics writes what top_entropy_quantile did: its threshold, averaged over the passes,
// and the fraction of the trained tokens that carried the policy term.
func maskMetrics(m Metrics, st stats) {
	if st.maskPasses == 0 {
		return
	}
	m["entropy_mask/threshold"] = st.maskThreshold / float64(st.maskPasses)
	if st.maskTokens > 0 {
		m["entropy_mask/fraction"] = float64(st.maskSelected) / float64(st.maskTokens)
	}
}
