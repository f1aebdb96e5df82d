package grpo

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
)

// TestLearnsToyTask: on a tiny model and a verifiable toy task — reward 1 when the
// completion contains token 7 — 50 GRPO steps raise the mean reward well above its start.
func TestLearnsToyTask(t *testing.T) {
	const target = 7
	policy := tinyModel(t, 11, 1)
	opt, err := optim.NewAdamW(policy, optim.AdamWConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8})
	if err != nil {
		t.Fatal(err)
	}
	tr := &Trainer{Policy: policy, Opt: opt}
	sampler := rollout.NewSampler(policy)
	r := rand.New(rand.NewPCG(12, 12))
	cfg := DefaultConfig()
	var rewards []float64
	for s := range 50 {
		prompts := make([][]int32, 8)
		for i := range prompts {
			prompts[i] = make([]int32, 2+r.IntN(3))
			for j := range prompts[i] {
				prompts[i][j] = int32(r.IntN(stop))
			}
		}
		b, err := sampler.Generate(context.Background(), prompts,
			rollout.Config{Group: 8, MaxNewTokens: 6, Temperature: 1, Seed: uint64(s), StopToken: stop})
		if err != nil {
			t.Fatal(err)
		}
		b.Rewards = make([]float64, len(b.Completions))
		for i, c := range b.Completions {
			if slices.Contains(c.Tokens, target) {
				b.Rewards[i] = 1
			}
		}
		m := step(t, tr, b, cfg)
		rewards = append(rewards, m["reward"])
	}
	before, after := mean(rewards[:5]), mean(rewards[45:])
	t.Logf("mean reward: first 5 steps %.3f, last 5 steps %.3f", before, after)
	if after < before+0.3 || after < 0.6 {
		t.Fatalf("GRPO did not learn the toy task: reward %.3f → %.3f", before, after)
	}
}
