package paritytest

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
)

// The training checks run the engine's own rollout and GRPO step, not the model calls they
// are built from: what a run on the device does, compared with the same run on the CPU.

// stopToken ends completions: GPT-2's EOT is outside the small vocabulary, so its last token.
var stopToken = int32(modelConfig.VocabSize - 1)

// prompts returns prompts of the given lengths, none of them holding the stop token.
func prompts(r *rand.Rand, lens ...int) [][]int32 {
	var ps [][]int32
	for _, n := range lens {
		p := make([]int32, n)
		for k := range p {
			p[k] = int32(r.IntN(int(stopToken)))
		}
		ps = append(ps, p)
	}
	return ps
}

func generate(t *testing.T, m *gpt2.Model, prompts [][]int32, cfg rollout.Config) *rollout.Batch {
	t.Helper()
	b, err := rollout.NewSampler(m).Generate(context.Background(), prompts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// scored packs every group as the trainer does, its prompt (of two tokens or more) once and
// its completions continuing it, scoring the completions' tokens; and returns the logprobs
// the rollout recorded for them in the same order.
func scored(b *rollout.Batch) (tb gpt2.Batch, recorded []float32) {
	for k, c := range b.Completions {
		p := b.Prompts[c.Prompt]
		if k%b.Group == 0 {
			tb.Add(p[:len(p)-1], len(p)) // context only
		}
		tb.AddContinuation(append([]int32{p[len(p)-1]}, c.Tokens...), 0)
		recorded = append(recorded, c.LogProbs...)
	}
	return tb, recorded
}

// Sampler: rollout.Sampler's Generate on the device and on the CPU, same prompts and seed.
// Tokens are drawn by comparing a uniform number with the cumulative probabilities, so they
// can only differ where a draw falls within the probabilities' rounding of a boundary: for
// a fixed seed that either happens or not, and here it must not. The recorded logprobs agree
// within TolModel, and equal the device's training forward (DESIGN invariant 2).
func (s Suite) Sampler(t *testing.T) {
	dev, ref := s.models(t, 34)
	ps := prompts(rand.New(rand.NewPCG(34, 1)), 4, 11)
	cfg := rollout.Config{Group: 3, MaxNewTokens: 8, Temperature: 0.8, Seed: 34, StopToken: stopToken}
	bd, br := generate(t, dev, ps, cfg), generate(t, ref, ps, cfg)
	stopped := 0
	for k, cr := range br.Completions {
		cd := bd.Completions[k]
		for i := range min(len(cd.Tokens), len(cr.Tokens)) {
			if cd.Tokens[i] != cr.Tokens[i] {
				t.Fatalf("completion %d, position %d: device sampled %d, CPU %d", k, i, cd.Tokens[i], cr.Tokens[i])
			}
		}
		if len(cd.Tokens) != len(cr.Tokens) || cd.Truncated != cr.Truncated || cd.Prompt != cr.Prompt {
			t.Fatalf("completion %d: device %d tokens (truncated %v, prompt %d), CPU %d (%v, %d)",
				k, len(cd.Tokens), cd.Truncated, cd.Prompt, len(cr.Tokens), cr.Truncated, cr.Prompt)
		}
		if !cr.Truncated {
			stopped++
		}
	}
	// Completions that stop early leave the decode batch: the rows of the later steps are
	// then a subset of the slots, which is what this should exercise.
	if stopped == 0 || stopped == len(br.Completions) {
		t.Fatalf("%d of %d completions stopped early: choose a seed where some do and some do not", stopped, len(br.Completions))
	}
	tb, recorded := scored(bd)
	_, want := scored(br)
	compare(t, "recorded logprobs", recorded, want, TolModel)
	out := forward(t, dev, &tb, cfg.Temperature)
	compare(t, "recorded logprob vs training forward", recorded, out.LogP, Tol{Abs: TolDecode})
}

// TrainerStep: one grpo.Trainer step on each backend from the same scored batch, sampled on
// the CPU: a KL term against a reference model, an entropy bonus, three micro-batches of
// two completions (a shared prompt, then two prompts side by side, then a shared prompt),
// gradient clipping and AdamW. The step's metrics agree within TolMetric, the gradient it
// leaves on the policy within TolGrad, its parameter moves within TolAdamLRs and the updated
// policy's logprobs within TolModel.
func (s Suite) TrainerStep(t *testing.T) {
	const seed = 67 // one completion stops after 3 tokens, the others run to 5
	dev, ref := s.models(t, seed)
	// The reference is the policy a little way back, as at any step after the first: with a
	// reference equal to the policy the KL and its gradient would be 0 on both sides.
	r := rand.New(rand.NewPCG(seed, 1))
	p := modelParams(seed)
	for i := range p {
		p[i] += float32(0.02 * r.NormFloat64())
	}
	refDev, refCPU := s.modelsOf(t, p)

	// Short prompts and completions: the emulator's time goes with the tokens the step runs,
	// each twice (the reference's forward, the policy's forward and backward).
	b := generate(t, ref, prompts(r, 3, 5), rollout.Config{Group: 3, MaxNewTokens: 5, Temperature: 1, Seed: seed, StopToken: stopToken})
	b.Rewards = []float64{1, 0, 0.5, 0.2, 0.9, 0} // both signs of advantage in each group
	// As a stale policy sampled it: every third token's recorded logprob is 0.5 above the
	// policy's (ratio e^−0.5) and the next one's 0.5 below (e^0.5), so that tokens lie in
	// both clip regions of [0.8, 1.2], further from their edges than any rounding.
	for _, c := range b.Completions {
		for i := range c.LogProbs {
			c.LogProbs[i] += []float32{0, 0.5, -0.5}[i%3]
		}
	}
	b.Edited()

	cfg := grpo.DefaultConfig()
	cfg.Beta, cfg.EntropyCoef, cfg.MicroBatch = 0.1, 0.01, 2
	adam := optim.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}
	before := ref.ParamsHost()
	var metrics [2]grpo.Metrics
	for i, m := range [2][2]*gpt2.Model{{dev, refDev}, {ref, refCPU}} {
		opt, err := optim.NewAdamW(m[0], adam)
		if err != nil {
			t.Fatal(err)
		}
		tr := grpo.Trainer{Policy: m[0], Ref: m[1], Opt: opt}
		if metrics[i], err = tr.Step(context.Background(), cloneBatch(b), cfg); err != nil {
			t.Fatal(err)
		}
	}
	md, mr := metrics[0], metrics[1]
	if mr["updates"] != 1 || mr["clip_ratio/low_mean"] == 0 || mr["clip_ratio/high_mean"] == 0 || mr["grad_norm"] <= cfg.MaxGradNorm {
		t.Fatalf("the CPU's step did not exercise one update, both clip regions and gradient clipping: %v", mr)
	}
	compareMetrics(t, md, mr)
	// One minibatch: the step's only update leaves its clipped gradient on the policy.
	compareGrads(t, dev, ref)
	compareAdamMoves(t, dev, ref, before, ref.GradsHost(), adam.LR)
	tb, _ := scored(b)
	compare(t, "logp after the step", forward(t, dev, &tb, b.Temperature).LogP, forward(t, ref, &tb, b.Temperature).LogP, TolModel)
}

// compareMetrics compares every metric but the timings within TolMetric.
func compareMetrics(t *testing.T, got, want grpo.Metrics) {
	t.Helper()
	keys := func(m grpo.Metrics) []string {
		var k []string
		for name := range m {
			if !strings.HasPrefix(name, "time/") && name != "tokens_per_sec" {
				k = append(k, name)
			}
		}
		slices.Sort(k)
		return k
	}
	names := keys(want)
	if g := keys(got); !slices.Equal(g, names) {
		t.Fatalf("device metrics %q, CPU %q", g, names)
	}
	worst, at := 0.0, ""
	for _, k := range names {
		g, w := got[k], want[k]
		e, lim := math.Abs(g-w), TolMetric.Abs+TolMetric.Rel*math.Abs(w)
		if !(e <= lim) {
			t.Errorf("metric %s = %.9g, CPU %.9g (error %.3g > %.3g)", k, g, w, e, lim)
			continue
		}
		if e/lim > worst {
			worst, at = e/lim, k
		}
	}
	t.Logf("%d metrics, worst error %.2g of tolerance (%s)", len(names), worst, at)
}

// cloneBatch copies b's completions and rewards, so that neither trainer sees what the other
// might do to them.
func cloneBatch(b *rollout.Batch) *rollout.Batch {
	c := *b
	c.Rewards = slices.Clone(b.Rewards)
	c.Completions = slices.Clone(b.Completions)
	for i := range c.Completions {
		c.Completions[i].Tokens = slices.Clone(c.Completions[i].Tokens)
		c.Completions[i].LogProbs = slices.Clone(c.Completions[i].LogProbs)
	}
	return &c
}
