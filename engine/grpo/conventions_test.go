package grpo

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/rollout"
)

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{DefaultConfig(), TRLConfig()} {
		if err := c.Validate(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	nan := math.NaN()
	for _, c := range []struct {
		name  string
		edit  func(*Config)
		key   string
		value any  // NaN: any NaN
		trl   bool // refused because trl_compat = true fixes it
	}{
		{"std_eps 0", func(c *Config) { c.StdEps = 0 }, "std_eps", 0.0, false},
		{"std_eps < 0", func(c *Config) { c.StdEps = -1e-4 }, "std_eps", -1e-4, false},
		{"std_eps NaN", func(c *Config) { c.StdEps = math.NaN() }, "std_eps", nan, false},
		{"beta NaN", func(c *Config) { c.Beta = math.NaN() }, "beta", nan, false},
		{"beta Inf", func(c *Config) { c.Beta = math.Inf(1) }, "beta", math.Inf(1), false},
		{"epsilon 1", func(c *Config) { c.Epsilon = 1 }, "epsilon", 1.0, false},
		{"std_ddof 2", func(c *Config) { c.StdDDOF = 2 }, "std_ddof", 2, false},
		{"loss_type", func(c *Config) { c.LossType = "mean" }, "loss_type", "mean", false},
		{"scale_rewards", func(c *Config) { c.ScaleRewards = "prompt" }, "scale_rewards", "prompt", false},
		{"importance_sampling_level", func(c *Config) { c.ImportanceSamplingLevel = "seq" }, "importance_sampling_level", "seq", false},
		{"kl_estimator", func(c *Config) { c.KLEstimator = "k4" }, "kl_estimator", "k4", false},
		{"entropy_aggregation", func(c *Config) { c.EntropyAggregation = "sum" }, "entropy_aggregation", "sum", false},
		{"num_iterations", func(c *Config) { c.NumIterations = 0 }, "num_iterations", 0, false},
		{"minibatches", func(c *Config) { c.Minibatches = 0 }, "minibatches", 0, false},
		{"trl_compat with ddof 0", func(c *Config) { *c = TRLConfig(); c.StdDDOF = 0 }, "std_ddof", 0, true},
		{"trl_compat with entropy as loss", func(c *Config) { *c = TRLConfig(); c.EntropyAggregation = EntropyAsLoss }, "entropy_aggregation", string(EntropyAsLoss), true},
		{"trl_compat without masked_in_denominator", func(c *Config) { *c = TRLConfig(); c.MaskedInDenominator = false }, "masked_in_denominator", false, true},
		{"trl_compat with kl_clamp", func(c *Config) { *c = TRLConfig(); c.KLClamp = 10 }, "kl_clamp", 10.0, true},
		{"kl_clamp < 0", func(c *Config) { c.KLClamp = -1 }, "kl_clamp", -1.0, false},
		{"top_entropy_quantile > 1", func(c *Config) { c.TopEntropyQuantile = 1.5 }, "top_entropy_quantile", 1.5, false},
		{"top_entropy_quantile < 0", func(c *Config) { c.TopEntropyQuantile = -0.1 }, "top_entropy_quantile", -0.1, false},
		{"top_entropy_quantile NaN", func(c *Config) { c.TopEntropyQuantile = math.NaN() }, "top_entropy_quantile", nan, false},
	} {
		cfg := DefaultConfig()
		c.edit(&cfg)
		err := cfg.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: error %v, want a *ConfigError", c.name, err)
			continue
		}
		isNaN := func(v any) bool { f, ok := v.(float64); return ok && math.IsNaN(f) }
		if ce.Key != c.key || (ce.Value != c.value && !(isNaN(c.value) && isNaN(ce.Value))) || (ce.FixedBy != "") != c.trl {
			t.Errorf("%s: %+v, want key %s, value %v, fixed by trl_compat %v", c.name, *ce, c.key, c.value, c.trl)
		}
	}
	// The names a name must be one of are the error's, for a recipe to offer.
	cfg := DefaultConfig()
	cfg.LossType = "mean"
	if ce := (*ConfigError)(nil); !errors.As(cfg.Validate(), &ce) || !slices.Equal(ce.Choices, []string{"grpo", "bnpo", "dapo", "dr_grpo", "cispo", "sapo"}) {
		t.Errorf("loss_type choices: %v", cfg.Validate())
	}
}

// TestAdvantageConventions: the group mean is subtracted; the divisor is the group's std,
// the batch's or none, with ddof 0 (this project) or 1 (TRL, torch.std), plus std_eps; a
// group without variance gets exactly 0 whatever the scale.
func TestAdvantageConventions(t *testing.T) {
	rewards := []float64{1, 0, 0, 0, 0.2, 0.4, 0.6, 0.8, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7}
	const eps = 1e-4
	// The batch's std: mean 0.5375, Σ(r−m)² = 1.4975 over 16 values.
	batchPop, batchUnb := math.Sqrt(1.4975/16), math.Sqrt(1.4975/15)
	for _, c := range []struct {
		scale Scale
		ddof  int
		want  [8]float64 // the first two groups; the last two are ties
	}{
		{ScaleGroup, 0, [8]float64{0.75 / (math.Sqrt(3.0/16) + eps), -0.25 / (math.Sqrt(3.0/16) + eps), 0, 0,
			-0.3 / (math.Sqrt(0.05) + eps), -0.1 / (math.Sqrt(0.05) + eps), 0.1 / (math.Sqrt(0.05) + eps), 0.3 / (math.Sqrt(0.05) + eps)}},
		{ScaleGroup, 1, [8]float64{0.75 / (0.5 + eps), -0.25 / (0.5 + eps), 0, 0,
			-0.3 / (math.Sqrt(0.2/3) + eps), -0.1 / (math.Sqrt(0.2/3) + eps), 0.1 / (math.Sqrt(0.2/3) + eps), 0.3 / (math.Sqrt(0.2/3) + eps)}},
		{ScaleBatch, 0, [8]float64{0.75 / (batchPop + eps), -0.25 / (batchPop + eps), 0, 0, -0.3 / (batchPop + eps), -0.1 / (batchPop + eps), 0.1 / (batchPop + eps), 0.3 / (batchPop + eps)}},
		{ScaleBatch, 1, [8]float64{0.75 / (batchUnb + eps), -0.25 / (batchUnb + eps), 0, 0, -0.3 / (batchUnb + eps), -0.1 / (batchUnb + eps), 0.1 / (batchUnb + eps), 0.3 / (batchUnb + eps)}},
		{ScaleNone, 1, [8]float64{0.75, -0.25, 0, 0, -0.3, -0.1, 0.1, 0.3}},
	} {
		cfg := DefaultConfig()
		cfg.ScaleRewards, cfg.StdDDOF = c.scale, c.ddof
		adv, zero := Advantages(rewards, 4, cfg)
		want := c.want
		want[2], want[3] = want[1], want[1]
		for i, w := range want {
			if math.Abs(adv[i]-w) > 1e-12 {
				t.Errorf("%s ddof %d: advantage %d = %.15g, want %.15g", c.scale, c.ddof, i, adv[i], w)
			}
		}
		for i := 8; i < 16; i++ {
			if adv[i] != 0 {
				t.Errorf("%s ddof %d: tied group's advantage %d = %g, want exactly 0", c.scale, c.ddof, i, adv[i])
			}
		}
		if zero[0] || zero[1] || !zero[2] || !zero[3] {
			t.Errorf("%s ddof %d: zero-variance groups %v, want [false false true true]", c.scale, c.ddof, zero)
		}
	}
	// With a negligible eps the two conventions differ by exactly √(G/(G−1)): +15% at G = 4.
	pop, unb := DefaultConfig(), DefaultConfig()
	pop.StdEps, unb.StdEps, unb.StdDDOF = 1e-300, 1e-300, 1
	a0, _ := Advantages(rewards[:4], 4, pop)
	a1, _ := Advantages(rewards[:4], 4, unb)
	if r := a0[0] / a1[0]; math.Abs(r-math.Sqrt(4.0/3)) > 1e-12 {
		t.Errorf("ddof 0 / ddof 1 advantage ratio %.15g, want √(4/3)", r)
	}
}

// TestZeroStdTie: which groups count as having no reward variance (advantages exactly 0,
// frac_reward_zero_std, drop_zero_std). This project: std ≤ max(1e-6, 1e-8·max|r|), so
// noise on the malformed penalty is a tie and a real difference at unit scale is not; with
// trl_compat, TRL's torch.isclose(std, 0): std ≤ 1e-8 whatever the rewards' size.
func TestZeroStdTie(t *testing.T) {
	pm := func(c, d float64) []float64 { return []float64{c + d, c - d, c + d, c - d} }
	const eps = 1e-4
	for _, c := range []struct {
		name     string
		rewards  []float64
		tie, trl bool // a tie here, and with trl_compat
	}{
		{"equal", []float64{0.5, 0.5, 0.5, 0.5}, true, true},
		{"equal to rounding", slices.Repeat([]float64{0.7}, 8), true, true},            // std 1.1e-16
		{"malformed penalty with shaping noise", pm(-0.3, 5e-9), true, true},           // std 5e-9 (TRL's: 5.8e-9)
		{"large rewards, difference of 1e-9 relative", pm(1000, 1e-6), true, false},    // std 1e-6 (1.15e-6)
		{"unit rewards, difference under 1e-6", pm(0.5, 5e-7), true, false},            // std 5e-7
		{"TRL's bound, just inside", pm(0, 8.5e-9), true, true},                        // TRL's std 9.8e-9
		{"TRL's bound, just outside", pm(0, 9e-9), true, false},                        // TRL's std 1.04e-8
		{"unit rewards, difference over 1e-6", pm(0.5, 2e-6), false, false},            // std 2e-6
		{"large rewards, difference over 1e-8 relative", pm(1000, 2e-5), false, false}, // std 2e-5
		{"a real difference", []float64{1, 0, 0, 0.25}, false, false},
	} {
		for _, trl := range []bool{false, true} {
			cfg, want := DefaultConfig(), c.tie
			if trl {
				cfg, want = TRLConfig(), c.trl
			}
			adv, zero := Advantages(c.rewards, len(c.rewards), cfg)
			if zero[0] != want {
				t.Errorf("%s (trl_compat %v): tie = %v, want %v (std %.3g)", c.name, trl, zero[0], want, std(c.rewards, cfg.StdDDOF))
				continue
			}
			m, s := mean(c.rewards), std(c.rewards, cfg.StdDDOF)
			for i, a := range adv {
				w := (c.rewards[i] - m) / (s + eps)
				if want {
					w = 0 // exactly: a tie moves nothing (DESIGN §6.4)
				}
				if a != w && !(math.Abs(a-w) <= 1e-12*math.Abs(w)) {
					t.Errorf("%s (trl_compat %v): advantage %d = %.9g, want %.9g", c.name, trl, i, a, w)
				}
			}
		}
	}
	// TRL's advantages of 1000 ± 1e-6: ±1e-6 / (1.15e-6 + 1e-4) ≈ ±0.0099, not 0.
	adv, _ := Advantages(pm(1000, 1e-6), 4, TRLConfig())
	if want := 1e-6 / (1e-6*math.Sqrt(4.0/3) + eps); math.Abs(adv[0]-want) > 1e-6*want {
		t.Errorf("trl_compat, 1000 ± 1e-6: advantage %.6g, want %.6g", adv[0], want)
	}
}

// tieHalf makes the first two of the batch's four groups zero-variance.
func tieHalf(b *rollout.Batch) {
	for i := range 2 * b.Group {
		b.Rewards[i] = 0.5
	}
}

// TestMaskedInDenominator: with half the groups left out by drop_zero_std, removing them
// from the sequence count (this project's default) doubles the gradient of the grpo and
// dr_grpo losses compared with keeping them there (TRL's completion mask); dapo and bnpo
// count only kept tokens either way (TRL's dapo since v1.9.0, huggingface/trl#6439: up to
// v1.8 its token count kept them, which scaled the gradient by kept / all tokens).
func TestMaskedInDenominator(t *testing.T) {
	for _, loss := range []LossType{LossGRPO, LossDrGRPO, LossDAPO, LossBNPO} {
		var grads [2][]float32
		for i, inDenominator := range []bool{false, true} {
			tr, b := setup(t, 12)
			tieHalf(b)
			g := captureGrads(tr)
			cfg := DefaultConfig()
			cfg.LossType, cfg.DropZeroStd, cfg.MaskedInDenominator = loss, true, inDenominator
			m := step(t, tr, b, cfg)
			if m["completions/kept"] != 8 {
				t.Fatalf("%s: kept %g completions, want 8", loss, m["completions/kept"])
			}
			grads[i] = *g
		}
		want := 2.0
		if loss == LossDAPO || loss == LossBNPO {
			want = 1
		}
		scale, worst := 0.0, 0.0
		for i := range grads[0] {
			scale = max(scale, math.Abs(float64(grads[1][i])))
			worst = max(worst, math.Abs(float64(grads[0][i])-want*float64(grads[1][i])))
		}
		if scale == 0 || worst > 1e-5*scale*want {
			t.Errorf("%s: gradient out of the denominator ≠ %.4g × gradient kept in it (max deviation %g of %g)", loss, want, worst, scale)
		}
	}
}

// TestEntropyAggregation: entropy_aggregation = token_mean weights the entropy term by the
// mean over the minibatch's tokens (TRL's convention for entropy), so entropy_loss equals
// the token-mean entropy; "loss" weights it like the grpo loss (per sequence, then over
// sequences), which differs when lengths differ.
func TestEntropyAggregation(t *testing.T) {
	for _, agg := range []EntropyAggregation{EntropyTokenMean, EntropyAsLoss} {
		tr, b := setup(t, 13)
		for i := range b.Completions { // lengths 1 to 5 (prefixes of what was sampled)
			c := &b.Completions[i]
			n := min(len(c.Tokens), 1+i%5)
			c.Tokens, c.LogProbs = c.Tokens[:n], c.LogProbs[:n]
		}
		cfg := DefaultConfig()
		cfg.EntropyCoef, cfg.EntropyAggregation = 0.01, agg
		m := step(t, tr, b, cfg)
		d := math.Abs(m["entropy_loss"] - m["entropy"])
		if agg == EntropyTokenMean && d > 1e-9 {
			t.Errorf("token_mean: entropy term %g, token-mean entropy %g", m["entropy_loss"], m["entropy"])
		}
		if agg == EntropyAsLoss && d < 1e-6 {
			t.Errorf("loss: entropy term %g equals the token mean %g: the sequence weighting is not applied", m["entropy_loss"], m["entropy"])
		}
	}
}

// TestFirstMinibatchMeasured: ratio/first_max_abs_log and kl/first_max come from the first
// minibatch that runs, also when the first minibatch is empty (fewer completions kept than
// minibatches), instead of reading 0.
func TestFirstMinibatchMeasured(t *testing.T) {
	tr, b := setup(t, 14)
	tieHalf(b) // 8 completions kept, 16 minibatches: every other one is empty, the first too
	for i := range b.Completions {
		for j := range b.Completions[i].LogProbs {
			b.Completions[i].LogProbs[j] -= 0.25 // the sampled logprobs disagree with the policy by 0.25
		}
	}
	b.Edited()
	cfg := DefaultConfig()
	cfg.DropZeroStd, cfg.Minibatches, cfg.Beta = true, 16, 0.1
	m := step(t, tr, b, cfg)
	if got := m["ratio/first_max_abs_log"]; math.Abs(got-0.25) > 1e-3 {
		t.Errorf("ratio/first_max_abs_log = %g, want ≈ 0.25 (the first non-empty minibatch's)", got)
	}
	if got := m["kl/first_max"]; math.Abs(got) > 1e-5 {
		t.Errorf("kl/first_max = %g before any update", got)
	}
	if m["updates"] != 8 {
		t.Errorf("%g updates, want one per non-empty minibatch (8)", m["updates"])
	}
}

// TestSamplingShapingRecorded: how a batch was drawn is in the step's metrics; a shaped
// batch draws one warning per trainer; a greedy batch is refused unless allow_greedy.
func TestSamplingShapingRecorded(t *testing.T) {
	var warnings []string
	tr, b := setupSampled(t, 15, rollout.Config{Group: 4, MaxNewTokens: 10, Temperature: 0.7, Shaping: rollout.Shaping{TopK: 5, TopP: 0.9}})
	tr.Warn = func(s string) { warnings = append(warnings, s) }
	m := step(t, tr, b, DefaultConfig())
	if m["sampling/top_k"] != 5 || m["sampling/top_p"] != 0.9 || m["sampling/greedy"] != 0 || math.Abs(m["sampling/temperature"]-0.7) > 1e-7 {
		t.Errorf("sampling metrics: top_k %g top_p %g greedy %g temperature %g", m["sampling/top_k"], m["sampling/top_p"], m["sampling/greedy"], m["sampling/temperature"])
	}
	step(t, tr, b, DefaultConfig())
	if len(warnings) != 1 || !strings.Contains(warnings[0], "top_k = 5, top_p = 0.9") || !strings.Contains(warnings[0], "softmax(logits/0.7)") {
		t.Errorf("warnings after two shaped steps: %q, want one naming the shaping", warnings)
	}

	plain, pb := setup(t, 15)
	plain.Warn = func(s string) { t.Errorf("unshaped batch warned: %s", s) }
	step(t, plain, pb, DefaultConfig())

	gr, gb := setupSampled(t, 15, rollout.Config{Group: 4, MaxNewTokens: 10, Temperature: 1, Shaping: rollout.Shaping{Greedy: true}})
	var be *BatchError
	if _, err := gr.Step(context.Background(), gb, DefaultConfig()); !errors.As(err, &be) || be.Setting != "allow_greedy" {
		t.Fatalf("a greedy batch: error %v, want a *BatchError naming allow_greedy", err)
	}
	cfg := DefaultConfig()
	cfg.AllowGreedy = true
	if m := step(t, gr, gb, cfg); m["sampling/greedy"] != 1 {
		t.Errorf("sampling/greedy = %g", m["sampling/greedy"])
	}
}

// TestSequenceLevelWarning: sequence-level ratios with a token-summed loss weight each
// sequence by its length; TRL warns, and so does a step, once.
func TestSequenceLevelWarning(t *testing.T) {
	for _, loss := range []LossType{LossGRPO, LossBNPO, LossDAPO, LossDrGRPO} {
		var warnings []string
		tr, b := setup(t, 16)
		tr.Warn = func(s string) { warnings = append(warnings, s) }
		cfg := DefaultConfig()
		cfg.LossType, cfg.ImportanceSamplingLevel = loss, LevelSequence
		step(t, tr, b, cfg)
		step(t, tr, b, cfg)
		want := 1
		if loss == LossGRPO {
			want = 0
		}
		if len(warnings) != want || (want == 1 && !strings.Contains(warnings[0], "loss_type = "+string(loss))) {
			t.Errorf("%s: warnings %q, want %d", loss, warnings, want)
		}
	}
}

func TestGroupOfOneRefused(t *testing.T) {
	tr, b := setupSampled(t, 17, rollout.Config{Group: 1, MaxNewTokens: 6, Temperature: 1})
	var ge *GroupError
	if _, err := tr.Step(context.Background(), b, DefaultConfig()); !errors.As(err, &ge) || ge.Group != 1 {
		t.Fatalf("group 1: error %v, want a *GroupError", err)
	}
}

// TestKLClamp: kl_clamp bounds each token's KL estimate to [−c, c] and takes its gradient
// away where it binds; inside the bound every estimator is unchanged, with the derivative of
// its value (central differences).
func TestKLClamp(t *testing.T) {
	const c = 10
	for _, est := range []KLEstimator{KLK1, KLK2, KLK3} {
		for _, d := range []float64{-14, -3, -0.5, 0, 0.7, 2, 2.5, 9.3, 12} { // d = logp_ref − logp_θ
			var free, clamped tokenLoss
			klTerm(est, 0, 0, d, &free)
			klTerm(est, c, 0, d, &clamped)
			if math.Abs(free.kl) <= c {
				const h = 1e-6
				var lo, hi tokenLoss
				klTerm(est, c, -h, d, &lo)
				klTerm(est, c, h, d, &hi)
				num := (hi.kl - lo.kl) / (2 * h)
				if clamped.kl != free.kl || clamped.klClamped || math.Abs(num-clamped.dklDLogp) > 1e-5*max(1, math.Abs(num)) {
					t.Errorf("%s d=%g inside the bound: kl %g (unclamped %g), ∂ %g (differences %g)", est, d, clamped.kl, free.kl, clamped.dklDLogp, num)
				}
				continue
			}
			if want := math.Copysign(c, free.kl); clamped.kl != want || clamped.dklDLogp != 0 || !clamped.klClamped {
				t.Errorf("%s d=%g beyond the bound: kl %g ∂ %g, want %g and 0", est, d, clamped.kl, clamped.dklDLogp, want)
			}
		}
	}
	// One token the reference finds e^9.3 times likelier than the policy: unclamped, its k3
	// (≈ 1.1e4) is the batch's KL; clamped, the KL reported is bounded and the ratio of
	// clamped tokens says why.
	tr, b := setup(t, 3)
	cfg := DefaultConfig()
	cfg.Beta, cfg.KLClamp = 0.1, c
	adv, _ := Advantages(b.Rewards, b.Group, cfg)
	var kept []*completion
	for i := range b.Completions {
		kept = append(kept, &completion{c: &b.Completions[i], prompt: b.Prompts[b.Completions[i].Prompt], adv: adv[i], keep: true})
	}
	if err := tr.referenceLogprobs(context.Background(), kept, b.Temperature, cfg); err != nil {
		t.Fatal(err)
	}
	kept[0].refLogp[0] += 9.3
	st := newStats()
	if err := tr.microBatch(kept, minibatchWeights(kept, totalOf(kept), cfg, b.MaxNewTokens), b.Temperature, cfg, &st, false); err != nil {
		t.Fatal(err)
	}
	if st.klMax != c || st.klClamped != 1 {
		t.Fatalf("kl/max %g with %d tokens clamped, want %d and 1", st.klMax, st.klClamped, c)
	}
}
