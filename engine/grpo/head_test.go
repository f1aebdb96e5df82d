package grpo

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
)

// stepWithHead runs one step with the fused head on or off and returns its metrics, the
// gradient of every update and the parameters after it.
func stepWithHead(t *testing.T, fused bool, seed uint64, headRows int, cfg Config) (Metrics, [][]float32, []float32) {
	t.Helper()
	defer func(old bool) { fusedHead = old }(fusedHead)
	fusedHead = fused
	tr, b := setup(t, seed)
	tr.Policy.HeadRows = headRows
	var grads [][]float32
	tr.Hooks.AfterBackward = func(p *gpt2.Model) { grads = append(grads, p.GradsHost()) }
	m := step(t, tr, b, cfg)
	return m, grads, tr.Policy.ParamsHost()
}

// TestFusedHeadIsForwardBackward: a token-level update through the fused head (each chunk's
// loss terms taken while its logits are in memory) computes what Forward then Backward
// computes, bit for bit — gradients of every update, the weights after the step and every
// metric — with chunks that end inside completions, several minibatches and iterations
// (ratios away from 1, clipping), the KL term and an entropy bonus.
func TestFusedHeadIsForwardBackward(t *testing.T) {
	cases := []struct {
		name     string
		headRows int
		edit     func(*Config)
	}{
		{"default", 0, func(*Config) {}},
		{"chunks of 5 rows", 5, func(*Config) {}},
		{"kl and entropy, chunks of 7", 7, func(c *Config) {
			c.Beta, c.KLEstimator, c.EntropyCoef, c.EntropyAggregation = 0.05, KLK3, 0.01, EntropyTokenMean
		}},
		{"dapo, micro-batches of 3, 2 minibatches × 2 iterations, chunks of 4", 4, func(c *Config) {
			c.LossType, c.MicroBatch, c.Minibatches, c.NumIterations = LossDAPO, 3, 2, 2
			c.Beta, c.KLEstimator, c.EntropyCoef = 0.1, KLK2, 0.02
			c.Epsilon, c.EpsilonHigh = 0.01, 0.02
		}},
		{"dr_grpo, masked truncations, chunks of 1", 1, func(c *Config) {
			c.LossType, c.MaskTruncated, c.MaskedInDenominator, c.NumIterations = LossDrGRPO, true, true, 2
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.edit(&cfg)
			wantM, wantG, wantP := stepWithHead(t, false, 11, c.headRows, cfg)
			gotM, gotG, gotP := stepWithHead(t, true, 11, c.headRows, cfg)
			if len(gotG) != len(wantG) || len(gotG) == 0 {
				t.Fatalf("%d updates fused, %d unfused", len(gotG), len(wantG))
			}
			for u := range wantG {
				if i := gpt2test.FirstBitDiff(gotG[u], wantG[u]); i >= 0 {
					t.Fatalf("update %d: gradient %d is %g fused, %g unfused", u, i, gotG[u][i], wantG[u][i])
				}
			}
			if i := gpt2test.FirstBitDiff(gotP, wantP); i >= 0 {
				t.Fatalf("parameter %d is %g fused, %g unfused", i, gotP[i], wantP[i])
			}
			for k, v := range wantM {
				if strings.HasPrefix(k, "time/") || k == "tokens_per_sec" {
					continue
				}
				if g, ok := gotM[k]; !ok || math.Float64bits(g) != math.Float64bits(v) {
					t.Errorf("metric %s is %v fused, %v unfused", k, g, v)
				}
			}
			if cfg.NumIterations > 1 && wantM["clip_ratio/region_mean"] == 0 {
				t.Error("nothing was clipped: the case does not cover the clip")
			}
		})
	}
}

// headRows counts the rows of LM-head products (the only MatMuls whose output is as wide as
// the vocabulary).
type headRows struct {
	backend.Backend
	vocab, rows int
}

func (h *headRows) MatMul(out, inp, w, bias backend.Buf, n, c, oc int) {
	if oc == h.vocab {
		h.rows += n
	}
	h.Backend.MatMul(out, inp, w, bias, n, c, oc)
}

// TestUpdateComputesLogitsOnce: a token-level step computes each completion token's logits
// twice — once under the reference, once under the policy, whose head turns them into their
// gradient — where a forward followed by a backward computes the policy's a second time. The
// sequence-level ratio still takes that second pass.
func TestUpdateComputesLogitsOnce(t *testing.T) {
	for _, c := range []struct {
		level  Level
		passes int // policy head passes per token, besides the reference's one
	}{{LevelToken, 1}, {LevelSequence, 2}} {
		t.Run(fmt.Sprint(c.level), func(t *testing.T) {
			be := &headRows{Backend: cpu.New(2), vocab: tinyConfig.VocabSize}
			policy := gpt2test.Random(t, be, tinyConfig, 12, 3)
			policy.HeadRows = 6
			ref := gpt2test.Random(t, be, tinyConfig, 12, 3)
			opt, err := optim.NewAdamW(policy, optim.DefaultAdamW())
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(12, 1))
			prompts := [][]int32{{1, 2, 3}, {4, 5}, {6}}
			b, err := rollout.NewSampler(policy).Generate(context.Background(), prompts,
				rollout.Config{Group: 4, MaxNewTokens: 9, Temperature: 1, Seed: 12, StopToken: stop})
			if err != nil {
				t.Fatal(err)
			}
			b.Rewards = make([]float64, len(b.Completions))
			tokens := 0
			for i, k := range b.Completions {
				b.Rewards[i] = r.Float64()
				tokens += len(k.Tokens)
			}
			cfg := DefaultConfig()
			cfg.Beta, cfg.ImportanceSamplingLevel, cfg.MicroBatch = 0.05, c.level, 5
			tr := &Trainer{Policy: policy, Ref: ref, Opt: opt}
			be.rows = 0
			m := step(t, tr, b, cfg)
			if m["updates"] != 1 {
				t.Fatalf("updates = %g", m["updates"])
			}
			if want := (1 + c.passes) * tokens; be.rows != want {
				t.Errorf("the step computed %d rows of logits for %d completion tokens, want %d", be.rows, tokens, want)
			}
		})
	}
}
