package grpo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
)

var tinyConfig = gpt2test.Tiny()

const stop = gpt2test.Stop

func tinyModel(t testing.TB, seed uint64, scale float32) *gpt2.Model {
	t.Helper()
	return gpt2test.Random(t, cpu.New(2), tinyConfig, seed, scale)
}

// setup returns a policy, a reference identical to it, an optimizer and a scored rollout
// batch of 4 prompts × group 4 with random rewards.
func setup(t testing.TB, seed uint64) (*Trainer, *rollout.Batch) {
	t.Helper()
	return setupSampled(t, seed, rollout.Config{Group: 4, MaxNewTokens: 10, Temperature: 0.9})
}

// setupSampled is setup with the batch sampled as cfg says (its seed and stop token are set
// here).
func setupSampled(t testing.TB, seed uint64, cfg rollout.Config) (*Trainer, *rollout.Batch) {
	t.Helper()
	policy, ref := tinyModel(t, seed, 3), tinyModel(t, seed, 3)
	opt, err := optim.NewAdamW(policy, optim.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	var prompts [][]int32
	for _, n := range []int{3, 7, 1, 5} {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32(r.IntN(stop))
		}
		prompts = append(prompts, p)
	}
	cfg.Seed, cfg.StopToken = seed, stop
	b, err := rollout.NewSampler(policy).Generate(context.Background(), prompts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.Rewards = make([]float64, len(b.Completions))
	for i := range b.Rewards {
		b.Rewards[i] = r.Float64()
	}
	return &Trainer{Policy: policy, Ref: ref, Opt: opt}, b
}

func step(t testing.TB, tr *Trainer, b *rollout.Batch, cfg Config) Metrics {
	t.Helper()
	m, err := tr.Step(context.Background(), b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFirstMinibatchInvariants is DESIGN §6.1: before any update the ratio is exactly 1 (log ρ
// = 0.0: the CPU forward is batch-invariant, so the sampler's logprobs are the training
// forward's bits), nothing is clipped, and the KL to a reference equal to the initial policy
// is exactly 0.
func TestFirstMinibatchInvariants(t *testing.T) {
	for _, est := range []KLEstimator{KLK1, KLK2, KLK3} {
		for _, mb := range []int{1, 3} {
			tr, b := setup(t, 1)
			cfg := DefaultConfig()
			cfg.Beta, cfg.KLEstimator, cfg.MicroBatch = 0.1, est, mb
			m := step(t, tr, b, cfg)
			if v := m["ratio/first_max_abs_log"]; v != 0 {
				t.Errorf("%s, micro-batches of %d: max |log ratio| on the first minibatch = %g, want 0.0", est, mb, v)
			}
			if m["clip_ratio/region_mean"] != 0 {
				t.Errorf("%s: clip fraction %g on the first minibatch", est, m["clip_ratio/region_mean"])
			}
			if v := m["kl/first_max"]; v != 0 {
				t.Errorf("%s, micro-batches of %d: KL to the initial policy = %g, want 0.0", est, mb, v)
			}
			if m["updates"] != 1 || m["finite"] != 1 {
				t.Errorf("%s: metrics %v", est, m)
			}
		}
	}
}

// TestOffPolicyStopsTheStep: a recorded logprob one ulp off the policy's, on a batch the policy
// sampled, stops the step before any update with an error naming the completion and token;
// the same batch marked Edited trains (its ratio is then measured, not held).
func TestOffPolicyStopsTheStep(t *testing.T) {
	tr, b := setup(t, 1)
	before := tr.Policy.ParamsHost()
	c := &b.Completions[5]
	c.LogProbs[2] = math.Nextafter32(c.LogProbs[2], 0)
	_, err := tr.Step(context.Background(), b, DefaultConfig())
	var off *OffPolicyError
	if !errors.As(err, &off) || off.Completion != 5 || off.Token != 2 || off.Update != 1 || off.Prompt != c.Prompt {
		t.Fatalf("a recorded logprob one ulp off: %v, want an OffPolicyError at completion 5 token 2 before update 1", err)
	}
	if !slices.Equal(before, tr.Policy.ParamsHost()) || tr.Opt.Steps != 0 {
		t.Fatal("the weights moved before the invariant was checked")
	}
	b.Edited()
	m := step(t, tr, b, DefaultConfig())
	if v := m["ratio/first_max_abs_log"]; v == 0 || v > 1e-6 {
		t.Errorf("an edited batch: max |log ratio| %g, want the one ulp measured", v)
	}
}

// lossAt evaluates the step's loss for the current parameters without updating anything.
func lossAt(t *testing.T, tr *Trainer, kept []*completion, b *rollout.Batch, cfg Config) float64 {
	st := newStats()
	if err := tr.microBatch(kept, minibatchWeights(kept, totalOf(kept), cfg, b.MaxNewTokens), b.Temperature, cfg, &st, false); err != nil {
		t.Fatal(err)
	}
	return st.loss
}

// TestLossGradientFiniteDifferences checks ∂L/∂θ for every loss variant and KL estimator
// against central differences, on a batch whose old logprobs are shifted so that some tokens
// sit in each clip region.
func TestLossGradientFiniteDifferences(t *testing.T) {
	type variant struct {
		loss      LossType
		level     Level
		kl        KLEstimator
		beta, ent float64
		entAgg    EntropyAggregation
		klClamp   float64
	}
	var variants []variant
	// cispo is left out: its weight is held constant (a stop-gradient), so its gradient is not
	// the derivative of its loss by design (TestCISPOAndSAPO checks it against its formula).
	for _, loss := range []LossType{LossGRPO, LossBNPO, LossDAPO, LossDrGRPO, LossSAPO} {
		for _, level := range []Level{LevelToken, LevelSequence} {
			variants = append(variants, variant{loss, level, KLK3, 0, 0, EntropyAsLoss, 0})
		}
	}
	for _, kl := range []KLEstimator{KLK1, KLK2, KLK3} {
		variants = append(variants, variant{LossDAPO, LevelToken, kl, 0.5, 0.05, EntropyAsLoss, 0})
	}
	variants = append(variants, variant{LossGRPO, LevelToken, KLK3, 0.5, 0.05, EntropyTokenMean, 0})
	// kl_clamp binding on some tokens: those add a constant, the rest their k3 gradient.
	variants = append(variants, variant{LossDAPO, LevelToken, KLK3, 0.5, 0, EntropyAsLoss, 0.2})
	for _, v := range variants {
		t.Run(fmt.Sprintf("%s/%s/%s/beta=%g/ent=%g/%s/kl_clamp=%g", v.loss, v.level, v.kl, v.beta, v.ent, v.entAgg, v.klClamp), func(t *testing.T) {
			tr, b := setup(t, 3)
			r := rand.New(rand.NewPCG(4, 4))
			for i := range b.Completions {
				for j := range b.Completions[i].LogProbs {
					b.Completions[i].LogProbs[j] += float32(0.6 * r.NormFloat64())
				}
			}
			cfg := DefaultConfig()
			cfg.LossType, cfg.ImportanceSamplingLevel, cfg.KLEstimator, cfg.Beta, cfg.EntropyCoef = v.loss, v.level, v.kl, v.beta, v.ent
			cfg.EntropyAggregation, cfg.KLClamp = v.entAgg, v.klClamp
			cfg.Epsilon, cfg.EpsilonHigh = 0.2, 0.3
			if v.level == LevelSequence {
				cfg.Epsilon, cfg.EpsilonHigh = 0.1, 0.1
			}
			adv, _ := Advantages(b.Rewards, b.Group, cfg)
			var kept []*completion
			for i := range b.Completions {
				kept = append(kept, &completion{c: &b.Completions[i], prompt: b.Prompts[b.Completions[i].Prompt], adv: adv[i], keep: true})
			}
			if v.beta > 0 {
				if err := tr.referenceLogprobs(context.Background(), kept, b.Temperature, cfg); err != nil {
					t.Fatal(err)
				}
				// Move the policy away from the reference so the KL gradient is not ~0.
				p := tr.Policy.ParamsHost()
				for i := range p {
					p[i] += float32(0.02 * r.NormFloat64())
				}
				tr.Policy.SetParams(p)
			}
			st := newStats()
			tr.Policy.ZeroGrads()
			if err := tr.microBatch(kept, minibatchWeights(kept, totalOf(kept), cfg, b.MaxNewTokens), b.Temperature, cfg, &st, true); err != nil {
				t.Fatal(err)
			}
			if st.clipLow+st.clipHigh == 0 && v.level == LevelToken && v.loss != LossSAPO { // sapo has no hard clip
				t.Fatal("no token is clipped: the test would not cover the clip")
			}
			if v.klClamp > 0 && (st.klClamped == 0 || st.klClamped == st.n) {
				t.Fatalf("kl_clamp binds on %d of %d tokens: the test would not cover both sides", st.klClamped, st.n)
			}
			if v.klClamp > 0 {
				t.Logf("kl_clamp binds on %d of %d tokens", st.klClamped, st.n)
			}
			grads, params := tr.Policy.GradsHost(), tr.Policy.ParamsHost()
			scale := 0.0
			for _, g := range grads {
				scale = max(scale, math.Abs(float64(g)))
			}
			worst := 0.0
			for _, name := range []string{"wte.weight", "h.0.attn.c_attn.weight", "h.1.mlp.c_fc.bias", "ln_f.weight", "h.1.ln_2.bias"} {
				tn, _ := tr.Policy.Layout.Lookup(name)
				for _, i := range []int{0, tn.Size / 3, tn.Size - 1} {
					k := tn.Off + i
					orig := params[k]
					const h = 3e-3
					params[k] = orig + h
					tr.Policy.SetParams(params)
					lp := lossAt(t, tr, kept, b, cfg)
					params[k] = orig - h
					tr.Policy.SetParams(params)
					lm := lossAt(t, tr, kept, b, cfg)
					params[k] = orig
					tr.Policy.SetParams(params)
					num := (lp - lm) / (2 * h)
					e := math.Abs(num-float64(grads[k])) / scale
					worst = max(worst, e)
					if e > 1e-2 {
						t.Errorf("%s[%d]: analytic %.6g, finite difference %.6g", name, i, grads[k], num)
					}
				}
			}
			t.Logf("worst FD error %.2g of max |grad| %.3g", worst, scale)
		})
	}
}

// TestNoSignalNoChange is DESIGN §6.4: all advantages zero and β = 0 ⇒ loss 0 and the
// parameters bit-identical after the step, also after a real step has left AdamW with
// momentum, and also when the rewards are equal but their std is not exactly 0 (eight
// rewards of 0.7 have a std of 1.1e-16: counted as a tie, not amplified into an update).
func TestNoSignalNoChange(t *testing.T) {
	for _, c := range []struct {
		name   string
		group  int
		reward float64
		warm   bool // a real step first, so AdamW has momentum to move the weights with
	}{
		{"exact tie", 4, 0.5, false},
		{"exact tie after a step", 4, 0.5, true},
		{"near tie", 8, 0.7, false},
		{"near tie after a step", 8, 0.7, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, b := setupSampled(t, 5, rollout.Config{Group: c.group, MaxNewTokens: 10, Temperature: 0.9})
			if c.warm {
				step(t, tr, b, DefaultConfig())
			}
			if s := std(slices.Repeat([]float64{c.reward}, c.group), 0); c.name[:4] == "near" && s == 0 {
				t.Fatalf("%d rewards of %g have std exactly 0: not a near tie", c.group, c.reward)
			}
			for i := range b.Rewards {
				b.Rewards[i] = c.reward
			}
			before := tr.Policy.ParamsHost()
			m := step(t, tr, b, DefaultConfig())
			if m["loss"] != 0 || m["no_signal"] != 1 || m["frac_reward_zero_std"] != 1 || m["updates"] != 0 {
				t.Fatalf("loss %g, no_signal %g, frac_reward_zero_std %g, updates %g", m["loss"], m["no_signal"], m["frac_reward_zero_std"], m["updates"])
			}
			after := tr.Policy.ParamsHost()
			for i := range before {
				if math.Float32bits(before[i]) != math.Float32bits(after[i]) {
					t.Fatalf("parameter %d changed with no signal (%g → %g)", i, before[i], after[i])
				}
			}
		})
	}
}

func captureGrads(tr *Trainer) *[]float32 {
	var g []float32
	tr.Hooks.AfterBackward = func(p *gpt2.Model) { g = p.GradsHost() }
	return &g
}

// TestMicroBatchSplitInvariance is DESIGN §6.5: the same minibatch split into 1, 2 or 4
// micro-batches gives the same gradient (up to float32 summation order).
// top_entropy_quantile's mask is the minibatch's, whatever its split.
func TestMicroBatchSplitInvariance(t *testing.T) {
	for _, loss := range []LossType{LossGRPO, LossBNPO, LossDAPO, LossDrGRPO, LossCISPO, LossSAPO, "dapo, top entropy 0.3"} {
		var ref []float32
		for _, micro := range []int{0, 8, 4} { // 16 completions: 1, 2 and 4 micro-batches
			tr, b := setup(t, 6)
			g := captureGrads(tr)
			cfg := DefaultConfig()
			cfg.LossType, cfg.MicroBatch, cfg.Beta, cfg.EntropyCoef, cfg.EntropyAggregation = loss, micro, 0.05, 0.01, EntropyTokenMean
			if loss == "dapo, top entropy 0.3" {
				cfg.LossType, cfg.TopEntropyQuantile = LossDAPO, 0.3
			}
			step(t, tr, b, cfg)
			if ref == nil {
				ref = *g
				continue
			}
			scale, worst := 0.0, 0.0
			for i := range ref {
				scale = max(scale, math.Abs(float64(ref[i])))
				worst = max(worst, math.Abs(float64((*g)[i]-ref[i])))
			}
			if worst > 1e-5*scale {
				t.Errorf("%s with micro-batches of %d: gradient differs by %g (max |grad| %g)", loss, micro, worst, scale)
			}
		}
	}
}

// TestEveryTensorGetsGradient is DESIGN §6.3: after a normal step every trainable tensor
// has a non-zero gradient.
func TestEveryTensorGetsGradient(t *testing.T) {
	tr, b := setup(t, 7)
	g := captureGrads(tr)
	step(t, tr, b, DefaultConfig())
	for _, tn := range tr.Policy.Layout.Tensors {
		nonzero := slices.ContainsFunc((*g)[tn.Off:tn.Off+tn.Size], func(x float32) bool { return x != 0 })
		if !nonzero {
			t.Errorf("%s received no gradient", tn.Name)
		}
	}
}

// TestNonFiniteNeverReachesWeights is DESIGN §6.9: a NaN gradient or a NaN reward skips the
// update; the weights and optimizer state stay bit-identical and the metrics say why.
func TestNonFiniteNeverReachesWeights(t *testing.T) {
	cases := map[string]func(*Trainer, *rollout.Batch){
		"nan gradient": func(tr *Trainer, _ *rollout.Batch) {
			tr.Hooks.AfterBackward = func(p *gpt2.Model) {
				g, _ := p.Grad("h.1.mlp.c_fc.weight")
				v := p.GradsHost()
				tn, _ := p.Layout.Lookup("h.1.mlp.c_fc.weight")
				v[tn.Off+5] = float32(math.NaN())
				p.B.Upload(g, v[tn.Off:tn.Off+tn.Size])
			}
		},
		"nan reward": func(_ *Trainer, b *rollout.Batch) { b.Rewards[3] = math.NaN() },
		"inf reward": func(_ *Trainer, b *rollout.Batch) { b.Rewards[0] = math.Inf(1) },
	}
	for name, inject := range cases {
		t.Run(name, func(t *testing.T) {
			tr, b := setup(t, 8)
			step(t, tr, b, DefaultConfig()) // one good step first: moments are non-zero
			params := tr.Policy.ParamsHost()
			mom := make([]float32, tr.Opt.M.N)
			tr.Policy.B.Download(mom, tr.Opt.M)
			steps := tr.Opt.Steps
			inject(tr, b)
			m := step(t, tr, b, DefaultConfig())
			if m["finite"] != 0 || m["skipped"] != 1 || m["updates"] != 0 {
				t.Fatalf("metrics finite=%g skipped=%g updates=%g", m["finite"], m["skipped"], m["updates"])
			}
			after := tr.Policy.ParamsHost()
			afterMom := make([]float32, tr.Opt.M.N)
			tr.Policy.B.Download(afterMom, tr.Opt.M)
			for i := range params {
				if math.Float32bits(params[i]) != math.Float32bits(after[i]) {
					t.Fatalf("parameter %d changed", i)
				}
			}
			if !slices.Equal(mom, afterMom) || tr.Opt.Steps != steps {
				t.Fatal("optimizer state changed")
			}
			for _, g := range tr.Policy.GradsHost() {
				if g != g {
					t.Fatal("a NaN gradient was left behind")
				}
			}
		})
	}
}

func TestEmptyBatchAndErrors(t *testing.T) {
	tr, b := setup(t, 9)
	m, err := tr.Step(context.Background(), &rollout.Batch{Group: 4}, DefaultConfig())
	if err != nil || m["empty_batch"] != 1 || m["updates"] != 0 {
		t.Fatalf("empty batch: %v, %v", m, err)
	}
	b.Rewards = b.Rewards[:3]
	if _, err := tr.Step(context.Background(), b, DefaultConfig()); err == nil {
		t.Error("missing rewards: no error")
	}
	cfg := DefaultConfig()
	cfg.LossType = "mean"
	if _, err := tr.Step(context.Background(), b, cfg); err == nil {
		t.Error("unknown loss_type: no error")
	}
	cfg = DefaultConfig()
	cfg.Beta = 0.1
	tr.Ref = nil
	if _, err := tr.Step(context.Background(), b, cfg); err == nil {
		t.Error("beta without reference: no error")
	}
}

// TestBetaZeroSkipsReference: with β = 0 the reference model is never run.
func TestBetaZeroSkipsReference(t *testing.T) {
	tr, b := setup(t, 10)
	tr.Ref = nil // a nil reference would panic if it were used
	m := step(t, tr, b, DefaultConfig())
	if _, ok := m["time/reference"]; ok {
		t.Error("reference phase timed with beta = 0")
	}
	if _, ok := m["kl"]; ok {
		t.Error("kl reported with beta = 0")
	}
}

// TestTopEntropyQuantileStep: a step with top_entropy_quantile ρ trains on the fraction ρ of
// the tokens (the highest entropies; ties aside), changes the gradient from ρ = 1's, keeps
// ratio ≡ 1 before its first update (DESIGN §6.1), and reports its threshold; ρ = 1 reports
// nothing and changes nothing. A loss written outside the engine refuses ρ < 1.
func TestTopEntropyQuantileStep(t *testing.T) {
	grads := map[float64][]float32{}
	for _, rho := range []float64{1, 0.3} {
		tr, b := setup(t, 11)
		g := captureGrads(tr)
		cfg := DefaultConfig()
		cfg.TopEntropyQuantile, cfg.EntropyCoef = rho, 0.01
		m := step(t, tr, b, cfg)
		grads[rho] = *g
		frac, has := m["entropy_mask/fraction"]
		if rho == 1 {
			if has {
				t.Errorf("ρ = 1 reported a mask: %v", m)
			}
			continue
		}
		if !has || frac < rho-0.05 || frac > rho+0.05 || !(m["entropy_mask/threshold"] > 0) {
			t.Errorf("ρ = %g: fraction %v, threshold %v", rho, frac, m["entropy_mask/threshold"])
		}
		if m["ratio/first_max_abs_log"] != 0 {
			t.Errorf("ρ = %g: log ratio before the first update %g, want 0", rho, m["ratio/first_max_abs_log"])
		}
	}
	if slices.Equal(grads[1], grads[0.3]) {
		t.Error("the mask did not change the gradient")
	}
	tr, b := setup(t, 11)
	cfg := DefaultConfig()
	cfg.TopEntropyQuantile = 0.5
	adv, _ := Advantages(b.Rewards, b.Group, cfg)
	_, err := tr.ForwardBackward(context.Background(), Pass{Batch: b, Adv: adv, Config: cfg, Loss: Loss{Name: "custom", Func: grpoSequenceLoss(0.2)}})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Key != "top_entropy_quantile" {
		t.Errorf("a Lua-style loss with ρ < 1: %v, want a ConfigError naming top_entropy_quantile", err)
	}
}
