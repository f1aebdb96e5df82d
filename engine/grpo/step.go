package grpo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
)

// Metrics is a flat name → number map. Names follow TRL where TRL has one ("kl",
// "clip_ratio/low_mean", "completions/mean_length", "frac_reward_zero_std", ...).
type Metrics map[string]float64

// Hooks let tests and fault drills reach into a step.
type Hooks struct {
	// AfterBackward runs after each minibatch's backward, before its gradient is checked.
	AfterBackward func(policy *gpt2.Model)
}

// Trainer updates a policy with GRPO.
type Trainer struct {
	Policy *gpt2.Model
	Ref    *gpt2.Model // frozen reference; needed only when Beta > 0
	Opt    *optim.AdamW
	Hooks  Hooks

	batch       gpt2.Batch
	out         gpt2.Output
	dlogp, dent []float32
}

// completion is one completion's place in the step.
type completion struct {
	c       *rollout.Completion
	prompt  []int32
	adv     float64
	refLogp []float32 // logp under the reference, when Beta > 0
}

// stats accumulates token-level quantities over a step.
type stats struct {
	n                         int
	ratioSum, ratioSq         float64
	ratioMin, ratioMax        float64
	klSum, klMax              float64
	entSum                    float64
	clipLow, clipHigh         int
	maxAbsLogRatio            float64
	loss, pgLoss, klLoss, ent float64 // aggregated (weighted) values of the current minibatch
}

func newStats() stats { return stats{ratioMin: math.Inf(1), ratioMax: math.Inf(-1)} }

// Step runs one GRPO step on a scored rollout batch: Epochs passes of Minibatches optimizer
// updates. A non-finite loss or gradient skips that update (the weights and the optimizer
// state stay as they were) and is counted in the metrics; the caller's recovery policy
// decides what follows. An empty batch is not an error: it is reported and nothing changes.
func (tr *Trainer) Step(ctx context.Context, b *rollout.Batch, cfg Config) (Metrics, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Beta > 0 && tr.Ref == nil {
		return nil, errors.New("grpo: beta > 0 needs a reference model")
	}
	m := Metrics{"lr": cfg.LR, "beta": cfg.Beta, "finite": 1, "updates": 0, "skipped": 0,
		"time/rollout": b.Stats.Seconds}
	n := len(b.Completions)
	if n == 0 {
		m["empty_batch"] = 1
		return m, nil
	}
	if len(b.Rewards) != n {
		return nil, fmt.Errorf("grpo: the batch has %d completions but %d rewards (score it before the step)", n, len(b.Rewards))
	}
	if b.Group < 1 || n%b.Group != 0 {
		return nil, fmt.Errorf("grpo: %d completions do not form groups of %d", n, b.Group)
	}
	start := time.Now()
	adv, zeroStd := Advantages(b.Rewards, b.Group, cfg.Scale, cfg.StdEps)
	rewardMetrics(m, b, zeroStd)

	var kept []*completion
	for i := range b.Completions {
		c := &b.Completions[i]
		if (cfg.DropZeroStd && zeroStd[i/b.Group]) || (cfg.MaskTruncated && c.Truncated) {
			continue
		}
		kept = append(kept, &completion{c: c, prompt: b.Prompts[c.Prompt], adv: adv[i]})
	}
	m["completions/kept"] = float64(len(kept))
	if len(kept) == 0 {
		m["no_signal"] = 1
		return m, nil
	}
	noSignal := cfg.Beta == 0 && cfg.EntropyCoef == 0
	for _, k := range kept {
		noSignal = noSignal && k.adv == 0
	}

	if cfg.Beta > 0 {
		t0 := time.Now()
		if err := tr.referenceLogprobs(ctx, kept, b.Temperature, cfg); err != nil {
			return nil, err
		}
		m["time/reference"] = time.Since(t0).Seconds()
	}

	t0 := time.Now()
	st := newStats()
	var first stats
	var lossSum, pgSum, klSum, entSum float64
	var normSum, normMax float64
	layerNorms := map[string]float64{}
	for epoch := range cfg.Epochs {
		for mb := range cfg.Minibatches {
			part := kept[mb*len(kept)/cfg.Minibatches : (mb+1)*len(kept)/cfg.Minibatches]
			if len(part) == 0 {
				continue
			}
			st.loss, st.pgLoss, st.klLoss, st.ent = 0, 0, 0, 0
			if !noSignal {
				tr.Policy.ZeroGrads()
			}
			weights := tokenWeights(part, cfg.Aggregation, b.MaxNewTokens)
			for lo := 0; lo < len(part); {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				hi := len(part)
				if cfg.MicroBatch > 0 {
					hi = min(hi, lo+cfg.MicroBatch)
				}
				if err := tr.microBatch(part[lo:hi], weights[lo:hi], b.Temperature, cfg, &st, !noSignal); err != nil {
					return nil, err
				}
				lo = hi
			}
			if epoch == 0 && mb == 0 {
				first = st // the first minibatch: nothing has been updated yet
			}
			lossSum, pgSum, klSum, entSum = lossSum+st.loss, pgSum+st.pgLoss, klSum+st.klLoss, entSum+st.ent
			if noSignal {
				continue // no gradient anywhere: nothing to apply, and AdamW's momentum must not move the weights
			}
			if tr.Hooks.AfterBackward != nil {
				tr.Hooks.AfterBackward(tr.Policy)
			}
			norms := optim.Norms(tr.Policy)
			if math.IsNaN(st.loss) || math.IsInf(st.loss, 0) || !norms.Finite() {
				m["skipped"]++
				m["finite"] = 0
				if !norms.Finite() {
					m["nonfinite_grad"]++
				} else {
					m["nonfinite_loss"]++
				}
				tr.Policy.ZeroGrads() // nothing non-finite stays behind
				continue
			}
			normSum += norms.Total
			normMax = max(normMax, norms.Total)
			for k, v := range norms.Named {
				layerNorms[k] += v
			}
			optim.Clip(tr.Policy, norms.Total, cfg.MaxGradNorm)
			tr.Opt.Step(cfg.LR)
			m["updates"]++
		}
	}
	m["time/update"] = time.Since(t0).Seconds()
	if noSignal {
		m["no_signal"] = 1
	}

	passes := float64(cfg.Epochs * cfg.Minibatches)
	m["loss"], m["pg_loss"], m["kl_loss"], m["entropy_loss"] = lossSum/passes, pgSum/passes, klSum/passes, entSum/passes
	if u := m["updates"]; u > 0 {
		m["grad_norm"], m["grad_norm/max"] = normSum/u, normMax
		for k, v := range layerNorms {
			m["grad_norm/"+k] = v / u
		}
	}
	tokenMetrics(m, st, first, cfg)
	lengthMetrics(m, b)
	elapsed := b.Stats.Seconds + time.Since(start).Seconds()
	m["time/total"] = elapsed
	if elapsed > 0 {
		m["tokens_per_sec"] = float64(b.Stats.NewTokens) / elapsed
	}
	return m, nil
}

// tokenWeights gives each completion's per-token weight in the minibatch's loss.
func tokenWeights(part []*completion, aggregation string, maxNew int) []float64 {
	w := make([]float64, len(part))
	total := 0
	for _, k := range part {
		total += len(k.c.Tokens)
	}
	for i, k := range part {
		switch aggregation {
		case "grpo":
			w[i] = 1 / float64(len(k.c.Tokens)*len(part))
		case "dapo":
			w[i] = 1 / float64(total)
		case "dr_grpo":
			w[i] = 1 / float64(len(part)*maxNew)
		}
	}
	return w
}

// pack lays out completions with their prompts, scoring each completion token. Completions
// of one prompt side by side share it: the prompt but its last token is packed once, and each
// completion continues it from that last token (whose row scores the completion's first).
func (tr *Trainer) pack(part []*completion) *gpt2.Batch {
	tr.batch.Reset()
	for i, k := range part {
		p := k.prompt
		shared := len(p) > 1 && ((i > 0 && part[i-1].c.Prompt == k.c.Prompt) || (i+1 < len(part) && part[i+1].c.Prompt == k.c.Prompt))
		if !shared {
			tr.batch.Add(append(append(make([]int32, 0, len(p)+len(k.c.Tokens)), p...), k.c.Tokens...), len(p)-1)
			continue
		}
		if i == 0 || part[i-1].c.Prompt != k.c.Prompt {
			tr.batch.Add(p[:len(p)-1], len(p)) // context only
		}
		tr.batch.AddContinuation(append(append(make([]int32, 0, 1+len(k.c.Tokens)), p[len(p)-1]), k.c.Tokens...), 0)
	}
	return &tr.batch
}

func (tr *Trainer) referenceLogprobs(ctx context.Context, kept []*completion, temperature float32, cfg Config) error {
	step := len(kept)
	if cfg.MicroBatch > 0 {
		step = cfg.MicroBatch
	}
	for lo := 0; lo < len(kept); lo += step {
		if err := ctx.Err(); err != nil {
			return err
		}
		part := kept[lo:min(len(kept), lo+step)]
		if err := tr.Ref.Score(tr.pack(part), temperature, false, &tr.out); err != nil {
			return fmt.Errorf("grpo: reference forward: %w", err)
		}
		off := 0
		for _, k := range part {
			k.refLogp = slices.Clone(tr.out.LogP[off : off+len(k.c.Tokens)])
			off += len(k.c.Tokens)
		}
	}
	return nil
}

// microBatch runs the forward over part, accumulates the loss and token statistics, and,
// when backward is set, the gradient.
func (tr *Trainer) microBatch(part []*completion, weights []float64, temperature float32, cfg Config, st *stats, backward bool) error {
	if err := tr.Policy.Forward(tr.pack(part), temperature, true, &tr.out); err != nil {
		return fmt.Errorf("grpo: policy forward: %w", err)
	}
	rows := len(tr.out.LogP)
	tr.dlogp, tr.dent = resize(tr.dlogp, rows), resize(tr.dent, rows)
	off := 0
	var tl tokenLoss
	for i, k := range part {
		w, tokens := weights[i], len(k.c.Tokens)
		logp, old := tr.out.LogP[off:off+tokens], k.c.LogProbs
		seqRatio := 0.0
		if cfg.RatioLevel == "sequence" {
			for t := range tokens {
				seqRatio += float64(logp[t]) - float64(old[t])
			}
			seqRatio = math.Exp(seqRatio / float64(tokens))
		}
		seqGrad := 0.0 // GSPO: Σ_t w·∂pg/∂s over the sequence
		for t := range tokens {
			x := float64(logp[t])
			logRatio := x - float64(old[t])
			ratio := math.Exp(logRatio)
			if cfg.RatioLevel == "sequence" {
				ratio = seqRatio
			}
			policyLoss(ratio, k.adv, cfg.ClipLow, cfg.ClipHigh, &tl)
			tl.kl, tl.dklDLogp = 0, 0
			if cfg.Beta > 0 {
				klTerm(cfg.KLEstimator, x, float64(k.refLogp[t]), &tl)
			}
			h := float64(tr.out.Entropy[off+t])
			st.loss += w * (tl.pg + cfg.Beta*tl.kl - cfg.EntropyCoef*h)
			st.pgLoss += w * tl.pg
			st.klLoss += w * cfg.Beta * tl.kl
			st.ent += w * h
			st.add(ratio, logRatio, tl, h, cfg.Beta > 0)

			g := cfg.Beta * tl.dklDLogp
			if cfg.RatioLevel == "sequence" {
				seqGrad += w * tl.dpgDRatio
			} else {
				g += tl.dpgDRatio * ratio
			}
			tr.dlogp[off+t] = float32(w * g)
			tr.dent[off+t] = float32(-w * cfg.EntropyCoef)
		}
		if cfg.RatioLevel == "sequence" {
			// ∂s/∂logp_t = s/|o| for every token of the sequence.
			d := seqGrad * seqRatio / float64(tokens)
			for t := range tokens {
				tr.dlogp[off+t] += float32(d)
			}
		}
		off += tokens
	}
	if !backward {
		return nil
	}
	var dent []float32
	if cfg.EntropyCoef != 0 {
		dent = tr.dent
	}
	return tr.Policy.Backward(tr.dlogp, dent)
}

func (s *stats) add(ratio, logRatio float64, t tokenLoss, h float64, kl bool) {
	s.n++
	s.ratioSum += ratio
	s.ratioSq += ratio * ratio
	s.ratioMin, s.ratioMax = min(s.ratioMin, ratio), max(s.ratioMax, ratio)
	s.maxAbsLogRatio = max(s.maxAbsLogRatio, math.Abs(logRatio))
	s.entSum += h
	if kl {
		s.klSum += t.kl
		s.klMax = max(s.klMax, t.kl)
	}
	if t.clippedLow {
		s.clipLow++
	}
	if t.clippedHigh {
		s.clipHigh++
	}
}

func resize(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

func rewardMetrics(m Metrics, b *rollout.Batch, zeroStd []bool) {
	m["reward"], m["reward_std"] = mean(b.Rewards), std(b.Rewards)
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

func tokenMetrics(m Metrics, st, first stats, cfg Config) {
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
	// DESIGN §6.1 as a runtime check: before the first update the ratio is 1 (|log ρ| ~ 1e-6)
	// and, with the reference equal to the initial policy, the KL is 0.
	m["ratio/first_max_abs_log"] = first.maxAbsLogRatio
	if cfg.Beta > 0 {
		m["kl"], m["kl/max"] = st.klSum/n, st.klMax
		m["kl/first_max"] = first.klMax
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
