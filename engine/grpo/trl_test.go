package grpo

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/rookscript/rookscript/engine/rollout"
)

// trlFixture is testdata/trl_fixture.json, written by testdata/gen_trl_fixture.py: TRL's
// GRPO loss transcribed in PyTorch (float64) with its gradients from autograd.
type trlFixture struct {
	Group               int `json:"group"`
	MaxCompletionLength int `json:"max_completion_length"`
	Inputs              struct {
		Rewards   []float64   `json:"rewards"`
		Lengths   []int       `json:"lengths"`
		Truncated []bool      `json:"truncated"`
		Logp      [][]float64 `json:"logp"`
		Old       [][]float64 `json:"old"`
		Ref       [][]float64 `json:"ref"`
		Entropy   [][]float64 `json:"entropy"`
	} `json:"inputs"`
	Cases []struct {
		Name       string          `json:"name"`
		Settings   json.RawMessage `json:"settings"`
		Advantages []float64       `json:"advantages"`
		Loss       float64         `json:"loss"`
		Dlogp      [][]float64     `json:"dlogp"`
		Dentropy   [][]float64     `json:"dentropy"`
	} `json:"cases"`
	// Ties are single groups of rewards near a tie: TRL's torch.isclose(std, 0) and advantages.
	Ties []struct {
		Rewards    []float64 `json:"rewards"`
		IsStdZero  bool      `json:"is_std_zero"`
		Advantages []float64 `json:"advantages"`
	} `json:"ties"`
}

func readTRLFixture(t *testing.T) trlFixture {
	t.Helper()
	raw, err := os.ReadFile("testdata/trl_fixture.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx trlFixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	return fx
}

func f32s(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// TestTRLParity checks advantages, loss, ∂L/∂logp and ∂L/∂H of every case in the TRL
// fixture within 1e-6: every loss_type, both importance sampling levels, the three reward
// scalings, β with each KL estimator, epsilon_high, mask_truncated_completions,
// drop_zero_std, the entropy term, the cispo and sapo loss types and top_entropy_quantile's
// mask, in trl_compat mode and in this project's conventions.
// The engine's own functions run on the fixture's log-probabilities in place of a forward:
// the plan (advantages, masks, minibatch), the minibatch weights and the sequence loss.
func TestTRLParity(t *testing.T) {
	fx := readTRLFixture(t)
	in := fx.Inputs
	if len(fx.Cases) < 30 {
		t.Fatalf("the fixture has %d cases", len(fx.Cases))
	}
	const tol = 1e-6
	for _, c := range fx.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var probe struct {
				TRLCompat bool `json:"trl_compat"`
			}
			json.Unmarshal(c.Settings, &probe)
			cfg := DefaultConfig()
			if probe.TRLCompat {
				cfg = TRLConfig()
			}
			dec := json.NewDecoder(bytes.NewReader(c.Settings))
			dec.DisallowUnknownFields() // the fixture speaks the config's own key names
			if err := dec.Decode(&cfg); err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			b := &rollout.Batch{Group: fx.Group, MaxNewTokens: fx.MaxCompletionLength, Rewards: in.Rewards}
			for i, n := range in.Lengths {
				old := in.Old[i][:n]
				if cfg.NumIterations == 1 {
					old = in.Logp[i][:n] // TRL's first iteration: old = logp.detach()
				}
				b.Prompts = append(b.Prompts, []int32{1})
				b.Completions = append(b.Completions, rollout.Completion{Prompt: i, Tokens: make([]int32, n),
					LogProbs: f32s(old), Truncated: in.Truncated[i]})
			}
			adv, zeroStd := Advantages(b.Rewards, b.Group, cfg)
			p := newPlan(b, b, adv, zeroStd, cfg, false)
			for i, want := range c.Advantages {
				if math.Abs(adv[i]-want) > tol {
					t.Errorf("advantage %d = %.9g, TRL %.9g", i, adv[i], want)
				}
			}
			if len(p.minibatches) != 1 {
				t.Fatalf("%d minibatches", len(p.minibatches))
			}
			part := p.minibatches[0]
			if cfg.TopEntropyQuantile < 1 { // the pass's mask, from the fixture's entropies
				var train []*completion
				var ent [][]float32
				var all []float32
				for _, k := range part {
					if k.keep {
						e := f32s(in.Entropy[k.c.Prompt][:len(k.c.Tokens)])
						train, ent, all = append(train, k), append(ent, e), append(all, e...)
					}
				}
				_, p.totals[0].selected = markHighEntropy(train, ent, all, cfg.TopEntropyQuantile)
			}
			w := minibatchWeights(part, p.totals[0], cfg, b.MaxNewTokens)
			st := newStats()
			dlogp := make([][]float32, len(in.Lengths))
			dent := make([][]float32, len(in.Lengths))
			for i, k := range part {
				if !k.keep {
					continue
				}
				row := k.c.Prompt // one prompt per completion here: the row
				n := len(k.c.Tokens)
				s := sequenceTokens{logp: f32s(in.Logp[row][:n]), old: k.c.LogProbs, ref: f32s(in.Ref[row][:n]),
					entropy: f32s(in.Entropy[row][:n]), high: k.highEntropy}
				dlogp[row], dent[row] = make([]float32, n), make([]float32, n)
				sequenceLoss(cfg, s, k.adv, w[i], &st, dlogp[row], dent[row])
			}
			if math.Abs(st.loss-c.Loss) > tol {
				t.Errorf("loss %.12g, TRL %.12g", st.loss, c.Loss)
			}
			worst := 0.0
			for row, n := range in.Lengths {
				for tk := range n {
					var gl, ge float64
					if dlogp[row] != nil {
						gl, ge = float64(dlogp[row][tk]), float64(dent[row][tk])
					}
					wantE := 0.0
					if c.Dentropy != nil {
						wantE = c.Dentropy[row][tk]
					}
					e := max(math.Abs(gl-c.Dlogp[row][tk]), math.Abs(ge-wantE))
					worst = max(worst, e)
					if e > tol {
						t.Errorf("completion %d token %d: dL/dlogp %.9g (TRL %.9g), dL/dH %.9g (TRL %.9g)",
							row, tk, gl, c.Dlogp[row][tk], ge, wantE)
					}
				}
			}
			t.Logf("loss %.6g (Δ %.1g), worst gradient Δ %.1g", st.loss, math.Abs(st.loss-c.Loss), worst)
		})
	}
}

// TestTRLZeroStd holds trl_compat's tie rule to torch.isclose(std, 0) itself, on the
// fixture's groups around its bound (|std| ≤ 1e-8) and at other scales. A group that is not
// a tie gets TRL's advantages; one that is gets exactly 0, where TRL leaves at most
// √(G−1)·1e-8/std_eps (here ≤ 1.8e-4).
func TestTRLZeroStd(t *testing.T) {
	fx := readTRLFixture(t)
	if len(fx.Ties) < 5 {
		t.Fatalf("the fixture has %d tie groups", len(fx.Ties))
	}
	cfg := TRLConfig()
	for _, c := range fx.Ties {
		adv, zero := Advantages(c.Rewards, len(c.Rewards), cfg)
		if zero[0] != c.IsStdZero {
			t.Errorf("rewards %v: tie %v, torch.isclose(std, 0) %v", c.Rewards, zero[0], c.IsStdZero)
			continue
		}
		for i, want := range c.Advantages {
			if c.IsStdZero {
				if adv[i] != 0 || math.Abs(want) > math.Sqrt(float64(len(c.Rewards)-1))*1e-8/cfg.StdEps {
					t.Errorf("rewards %v: tie advantage %d = %g (TRL %g), want exactly 0", c.Rewards, i, adv[i], want)
				}
			} else if math.Abs(adv[i]-want) > 1e-9*max(1, math.Abs(want)) {
				t.Errorf("rewards %v: advantage %d = %.12g, TRL %.12g", c.Rewards, i, adv[i], want)
			}
		}
	}
}
