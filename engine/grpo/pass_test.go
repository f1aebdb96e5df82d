package grpo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rookscript/rookscript/engine/rollout"
)

// compose is Step written with the primitives, as a recipe would: Step's advantages set on
// the batch, the reference scored, then each pass's minibatches run by ForwardBackward and
// applied by OptimStep.
func compose(t *testing.T, tr *Trainer, b *rollout.Batch, cfg Config) {
	t.Helper()
	ctx := context.Background()
	adv, _ := Advantages(b.Rewards, b.Group, cfg)
	var ref [][]float32
	if cfg.Beta > 0 {
		var err error
		if ref, _, err = Score(ctx, tr.Ref, b, cfg.MicroBatch, false); err != nil {
			t.Fatal(err)
		}
	}
	for range cfg.NumIterations {
		for mb := range cfg.Minibatches {
			if _, err := tr.ForwardBackward(ctx, Pass{Batch: b, Adv: adv, RefLogp: ref, Config: cfg, Minibatch: mb, Loss: Loss{Name: string(cfg.LossType), Step: true}}); err != nil {
				t.Fatal(err)
			}
			if _, err := tr.OptimStep(cfg.MaxGradNorm); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestComposedIsStep: the primitives composed give Step's weights and optimizer state bit for
// bit, for every loss type, both importance-sampling levels, with and without the KL term,
// several passes and minibatches, masked completions, micro-batches — and with no signal.
func TestComposedIsStep(t *testing.T) {
	cases := map[string]func(*Config){
		"with beta":          func(c *Config) { c.Beta = 0.05 },
		"sequence level":     func(c *Config) { c.ImportanceSamplingLevel = LevelSequence },
		"sequence with beta": func(c *Config) { c.ImportanceSamplingLevel, c.Beta = LevelSequence, 0.05 },
		"2 passes, 2 minibatches, micro-batches of 3, entropy": func(c *Config) {
			c.NumIterations, c.Minibatches, c.MicroBatch, c.EntropyCoef, c.Beta = 2, 2, 3, 0.01, 0.02
		},
		"masked, in the denominator": func(c *Config) {
			c.DropZeroStd, c.MaskTruncated, c.MaskedInDenominator, c.Minibatches = true, true, true, 3
		},
		"no signal": func(c *Config) {},
		"top entropy quantile 0.3, micro-batches of 2, entropy": func(c *Config) {
			c.TopEntropyQuantile, c.MicroBatch, c.EntropyCoef = 0.3, 2, 0.01
		},
	}
	for _, lt := range []LossType{LossGRPO, LossBNPO, LossDAPO, LossDrGRPO, LossCISPO, LossSAPO} {
		for name, set := range cases {
			t.Run(string(lt)+"/"+name, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.LossType = lt
				set(&cfg)
				a, b := setup(t, 21)
				if name == "no signal" {
					for i := range b.Rewards {
						b.Rewards[i] = 0.5
					}
				}
				c, b2 := setup(t, 21)
				b2.Rewards = slices.Clone(b.Rewards)
				for range 2 { // the second step starts from moved weights and AdamW moments
					step(t, a, b, cfg)
					compose(t, c, b2, cfg)
				}
				pa, pc := a.Policy.ParamsHost(), c.Policy.ParamsHost()
				for i := range pa {
					if math.Float32bits(pa[i]) != math.Float32bits(pc[i]) {
						t.Fatalf("parameter %d: Step %v, composed %v", i, pa[i], pc[i])
					}
				}
				ma, _ := a.Opt.Export()
				mc, _ := c.Opt.Export()
				if !slices.Equal(ma, mc) || a.Opt.Steps != c.Opt.Steps {
					t.Fatal("the optimizer states differ")
				}
				if name == "no signal" && a.Opt.Steps != 0 {
					t.Fatalf("%d updates without a signal", a.Opt.Steps)
				}
				if name != "no signal" && a.Opt.Steps == 0 {
					t.Fatal("no update was made: the test proves nothing")
				}
			})
		}
	}
}

// grpoSequenceLoss is the grpo loss (token level, β = 0) written outside the engine, as a
// recipe writes it.
func grpoSequenceLoss(eps float64) SequenceLoss {
	return func(seqs []Sequence, tot Totals) (float64, error) {
		loss := 0.0
		for _, s := range seqs {
			w := 1 / float64(s.Len*tot.Sequences)
			for t := range s.Logp {
				ratio := math.Exp(float64(s.Logp[t]) - float64(s.Old[t]))
				a := s.Adv[t]
				u, c := ratio*a, min(max(ratio, 1-eps), 1+eps)*a
				if u <= c {
					loss += -u * w
					s.DLogp[t] = float32(-a * ratio * w)
				} else {
					loss += -c * w
				}
			}
		}
		return loss, nil
	}
}

// TestCustomLossIsBuiltin: a loss computed outside the engine, applied as the backward's row
// gradients after one forward — whole completions, or token-level inside the fused pass, LM-head
// chunk by chunk — gives the built-in loss's gradient and loss.
func TestCustomLossIsBuiltin(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MicroBatch = 5
	grads := func(loss Loss, perturb bool) ([]float32, float64) {
		tr, b := setup(t, 5)
		tr.Policy.HeadRows = 7 // chunks that cut completions
		// Ratios away from 1, some clipped.
		if perturb {
			r := rand.New(rand.NewPCG(3, 3))
			for i := range b.Completions {
				for j := range b.Completions[i].LogProbs {
					b.Completions[i].LogProbs[j] += float32(0.3 * r.NormFloat64())
				}
			}
			b.Edited()
		}
		adv, _ := Advantages(b.Rewards, b.Group, cfg)
		tr.ZeroGrads()
		m, err := tr.ForwardBackward(context.Background(), Pass{Batch: b, Adv: adv, Config: cfg, Loss: loss})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Policy.GradsHost(), m["loss"]
	}
	for _, perturb := range []bool{false, true} {
		want, wl := grads(Loss{Name: "grpo"}, perturb)
		for _, token := range []bool{false, true} {
			got, gl := grads(Loss{Name: "lua grpo", Func: grpoSequenceLoss(cfg.Epsilon), TokenLevel: token}, perturb)
			if d := maxRelDiff(want, got); d > 1e-6 {
				t.Errorf("perturbed %v, token level %v: the gradients differ by %g of their largest", perturb, token, d)
			}
			if math.Abs(wl-gl) > 1e-9*max(1, math.Abs(wl)) {
				t.Errorf("perturbed %v, token level %v: loss %v, built in %v", perturb, token, gl, wl)
			}
		}
	}
}

func maxRelDiff(a, b []float32) float64 {
	worst, scale := 0.0, 0.0
	for i := range a {
		worst = max(worst, math.Abs(float64(a[i])-float64(b[i])))
		scale = max(scale, math.Abs(float64(a[i])))
	}
	return worst / scale
}

// TestTinkerLossGradients: each of Tinker's losses' ∂L/∂logp matches central differences of
// its loss (cispo's, whose clipped ratio is a constant of the gradient, its formula), for
// ratios inside and outside the clip and both signs of the advantage.
func TestTinkerLossGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	n := 40
	logp, old, adv := make([]float32, n), make([]float32, n), make([]float64, n)
	for i := range n {
		logp[i] = float32(-0.1 - 3*r.Float64())
		old[i] = logp[i] + float32(0.5*r.NormFloat64())
		adv[i] = r.NormFloat64()
	}
	for _, name := range LossNames[4:] {
		t.Run(name, func(t *testing.T) {
			l := Loss{Name: name, Tinker: DefaultTinkerConfig()}
			loss := func(x []float32) (float64, []float32) {
				st := newStats()
				d := make([]float32, n)
				tinkerLoss(l, sequenceTokens{logp: x, old: old, adv: adv}, 0, &st, d)
				return st.loss, d
			}
			_, d := loss(logp)
			if name == LossTinkerCISPO { // the clipped ratio is held still: its gradient is not the loss's slope
				for i := range n {
					c := min(max(math.Exp(float64(logp[i])-float64(old[i])), 0.8), 1.2)
					if want := float32(-c * adv[i]); d[i] != want {
						t.Errorf("token %d: dlogp %v, want −clip(ρ)·A = %v", i, d[i], want)
					}
				}
				return
			}
			const h = 1e-3
			for i := range n {
				if ratio := math.Exp(float64(logp[i] - old[i])); math.Abs(ratio-0.8) < 0.01 || math.Abs(ratio-1.2) < 0.01 {
					continue // a kink of the clip within the step
				}
				x := slices.Clone(logp)
				x[i] = logp[i] + h
				up, _ := loss(x)
				xu := x[i]
				x[i] = logp[i] - h
				down, _ := loss(x)
				fd := (up - down) / float64(xu-x[i])
				if math.Abs(fd-float64(d[i])) > 2e-3*max(1, math.Abs(fd)) {
					t.Errorf("token %d: dlogp %v, finite differences %v", i, d[i], fd)
				}
			}
		})
	}
}

// TestCustomLossNonFinite is DESIGN §6.9 for a loss computed outside the engine: a NaN
// gradient or loss reaches neither the weights nor the optimizer, and the update says where.
func TestCustomLossNonFinite(t *testing.T) {
	for _, c := range []struct {
		what  string
		token bool
	}{{"dlogp", false}, {"loss", false}, {"dlogp", true}} {
		what := c.what
		t.Run(fmt.Sprint(what, c.token), func(t *testing.T) {
			tr, b := setup(t, 4)
			tr.Policy.HeadRows = 5
			cfg := DefaultConfig()
			adv, _ := Advantages(b.Rewards, b.Group, cfg)
			before := tr.Policy.ParamsHost()
			bad := func(seqs []Sequence, tot Totals) (float64, error) {
				l, _ := grpoSequenceLoss(0.2)(seqs, tot)
				if what == "loss" {
					return math.NaN(), nil
				}
				for _, s := range seqs {
					if s.Completion == len(b.Completions)-1 && s.First <= 1 && s.First+len(s.Logp) > 1 {
						s.DLogp[1-s.First] = float32(math.Inf(1))
					}
				}
				return l, nil
			}
			m, err := tr.ForwardBackward(context.Background(), Pass{Batch: b, Adv: adv, Config: cfg, Loss: Loss{Func: bad, TokenLevel: c.token}})
			if err != nil {
				t.Fatal(err)
			}
			if m["finite"] != 0 {
				t.Error("the pass reports a finite loss")
			}
			up, err := tr.OptimStep(1)
			if err != nil {
				t.Fatal(err)
			}
			if up.Applied || up.Where == nil || up.Where.What != what {
				t.Fatalf("update %+v", up)
			}
			if what == "dlogp" && (up.Where.Completion != len(b.Completions)-1 || up.Where.Token != 1) {
				t.Errorf("non-finite value at %v, want the last completion's token 1", up.Where)
			}
			if !slices.Equal(before, tr.Policy.ParamsHost()) || tr.Opt.Steps != 0 {
				t.Error("the weights or the optimizer moved")
			}
		})
	}
}

// TestAccumulation: ForwardBackward adds to the gradient; OptimStep applies it and leaves it
// (clipped) on the policy, and the next ForwardBackward starts from zero.
func TestAccumulation(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Minibatches = 2
	pass := func(tr *Trainer, b *rollout.Batch, mb int) {
		adv, _ := Advantages(b.Rewards, b.Group, cfg)
		if _, err := tr.ForwardBackward(context.Background(), Pass{Batch: b, Adv: adv, Config: cfg, Minibatch: mb, Loss: Loss{Name: "grpo"}}); err != nil {
			t.Fatal(err)
		}
	}
	tr, b := setup(t, 8)
	pass(tr, b, 0)
	g0 := tr.Policy.GradsHost()
	tr.ZeroGrads()
	pass(tr, b, 1)
	g1 := tr.Policy.GradsHost()
	tr.ZeroGrads()
	pass(tr, b, 0)
	pass(tr, b, 1)
	both := tr.Policy.GradsHost()
	for i := range both {
		if want := g0[i] + g1[i]; math.Abs(float64(both[i]-want)) > 1e-6*max(1, math.Abs(float64(want))) {
			t.Fatalf("gradient %d: %v after both passes, %v + %v apart", i, both[i], g0[i], g1[i])
		}
	}
	if up, err := tr.OptimStep(1); err != nil || !up.Applied || up.Passes != 2 {
		t.Fatalf("%+v, %v", up, err)
	}
	if !slices.ContainsFunc(tr.Policy.GradsHost(), func(g float32) bool { return g != 0 }) {
		t.Error("OptimStep left no gradient to look at")
	}
	pass(tr, b, 0) // a new step: its gradient is its own pass's, not added to the last step's
	again := tr.Policy.GradsHost()
	tr.ZeroGrads()
	pass(tr, b, 0)
	if fresh := tr.Policy.GradsHost(); !slices.Equal(again, fresh) {
		t.Fatal("the pass after OptimStep added to the applied update's gradient")
	}
	if up, err := tr.OptimStep(1); err != nil || up.Passes != 1 {
		t.Fatalf("the step after: %+v, %v; want one pass applied", up, err)
	}
}

// TestForwardBackwardFirstPass is DESIGN §6.1 for the primitives: the first pass on a batch
// the policy sampled gives the recorded log-probabilities bit for bit; a recorded one changed
// behind the batch's back is an *OffPolicyError before anything accumulates.
func TestForwardBackwardFirstPass(t *testing.T) {
	tr, b := setup(t, 6)
	cfg := DefaultConfig()
	adv, _ := Advantages(b.Rewards, b.Group, cfg)
	p := Pass{Batch: b, Adv: adv, Config: cfg, Loss: Loss{Name: "grpo"}}
	m, err := tr.ForwardBackward(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m["ratio/first_max_abs_log"]; !ok || v != 0 {
		t.Fatalf("ratio/first_max_abs_log = %v (reported %v), want exactly 0", v, ok)
	}
	tr.ZeroGrads()
	b.Completions[2].LogProbs[0] += 1e-3
	_, err = tr.ForwardBackward(context.Background(), p)
	var off *OffPolicyError
	if !errors.As(err, &off) || off.Completion != 2 || off.Token != 0 {
		t.Fatalf("got %v, want an OffPolicyError at completion 2 token 0", err)
	}
}

// TestPassErrors: what ForwardBackward refuses, each as a typed error.
func TestPassErrors(t *testing.T) {
	tr, b := setup(t, 6)
	cfg := DefaultConfig()
	adv, _ := Advantages(b.Rewards, b.Group, cfg)
	beta := cfg
	beta.Beta = 0.1
	cases := map[string]Pass{
		"unknown loss":         {Batch: b, Adv: adv, Config: cfg, Loss: Loss{Name: "ppo2"}},
		"no advantages":        {Batch: &rollout.Batch{Group: b.Group, Prompts: b.Prompts, Completions: b.Completions}, Config: cfg, Loss: Loss{Name: "grpo"}},
		"short advantages":     {Batch: b, Adv: adv[1:], Config: cfg, Loss: Loss{Name: "grpo"}},
		"minibatch":            {Batch: b, Adv: adv, Config: cfg, Minibatch: 1, Loss: Loss{Name: "grpo"}},
		"tinker with a kl":     {Batch: b, Adv: adv, Config: beta, Loss: Loss{Name: "ppo", Tinker: DefaultTinkerConfig()}},
		"tinker thresholds":    {Batch: b, Adv: adv, Config: cfg, Loss: Loss{Name: "ppo", Tinker: TinkerConfig{ClipLowThreshold: 2, ClipHighThreshold: 1}}},
		"token advantages off": {Batch: b, TokenAdv: make([][]float64, len(b.Completions)), Config: cfg, Loss: Loss{Name: "grpo"}},
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := tr.ForwardBackward(context.Background(), p)
			var ce *ConfigError
			var be *BatchError
			if !errors.As(err, &ce) && !errors.As(err, &be) {
				t.Fatalf("got %v, want a *ConfigError or *BatchError", err)
			}
		})
	}
}
