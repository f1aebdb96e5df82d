package rollout

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
)

// tinyConfig is the tests' tiny model with a context of 40.
var tinyConfig = func() gpt2.Config {
	c := gpt2test.Tiny()
	c.MaxSeqLen = 40
	return c
}()

const stop = gpt2test.Stop

// tinyModel scales GPT-2's initialisation (std 0.02) by scale: 1 gives near-uniform
// distributions, 10 peaked, position-dependent ones.
func tinyModel(t testing.TB, scale float32) *gpt2.Model {
	t.Helper()
	return gpt2test.Random(t, cpu.New(2), tinyConfig, 5, scale)
}

func prompts(r *rand.Rand, lens ...int) [][]int32 {
	var out [][]int32
	for _, n := range lens {
		p := make([]int32, n)
		for i := range p {
			p[i] = int32(r.IntN(stop))
		}
		out = append(out, p)
	}
	return out
}

func generate(t *testing.T, s *Sampler, ps [][]int32, cfg Config) *Batch {
	t.Helper()
	b, err := s.Generate(context.Background(), ps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func baseConfig() Config {
	return Config{Group: 3, MaxNewTokens: 12, Temperature: 0.9, Seed: 7, StopToken: stop}
}

func TestGenerateShapeAndStopping(t *testing.T) {
	s := NewSampler(tinyModel(t, 1))
	ps := prompts(rand.New(rand.NewPCG(1, 1)), 4, 9, 1)
	cfg := baseConfig()
	cfg.MaxNewTokens = 20
	b := generate(t, s, ps, cfg)
	if len(b.Completions) != 9 {
		t.Fatalf("%d completions, want 9", len(b.Completions))
	}
	newTokens, truncated, stopped := 0, 0, 0
	for k, c := range b.Completions {
		if c.Prompt != k/3 {
			t.Errorf("completion %d belongs to prompt %d, want %d", k, c.Prompt, k/3)
		}
		if len(c.Tokens) == 0 || len(c.Tokens) != len(c.LogProbs) || len(c.Tokens) > 20 {
			t.Fatalf("completion %d: %d tokens, %d logprobs", k, len(c.Tokens), len(c.LogProbs))
		}
		for i, tok := range c.Tokens[:len(c.Tokens)-1] {
			if tok == stop {
				t.Fatalf("completion %d continues after the stop token at %d", k, i)
			}
		}
		last := c.Tokens[len(c.Tokens)-1]
		if c.Truncated != (last != stop) || (c.Truncated && len(c.Tokens) != 20) {
			t.Fatalf("completion %d: truncated=%v, last token %d, length %d", k, c.Truncated, last, len(c.Tokens))
		}
		if c.Truncated {
			truncated++
		} else {
			stopped++
		}
		newTokens += len(c.Tokens)
	}
	if truncated == 0 || stopped == 0 {
		t.Fatalf("want both stopped and truncated completions in this fixture, got %d and %d", stopped, truncated)
	}
	// Finished rows leave the batch: every decode step serves only unfinished completions,
	// so the new tokens counted equal the tokens kept.
	if b.Stats.NewTokens != newTokens {
		t.Fatalf("sampled %d tokens but kept %d", b.Stats.NewTokens, newTokens)
	}
	longest := 0
	for _, c := range b.Completions {
		longest = max(longest, len(c.Tokens))
	}
	if b.Stats.DecodeSteps != longest-1 {
		t.Fatalf("%d decode steps for a longest completion of %d tokens", b.Stats.DecodeSteps, longest)
	}
}

// TestSameSeedSameTokens: the same seed gives the same completions, however the prompts are
// batched; another seed gives others.
func TestSameSeedSameTokens(t *testing.T) {
	s := NewSampler(tinyModel(t, 10))
	r := rand.New(rand.NewPCG(2, 2))
	ps := prompts(r, 5, 3, 8)
	cfg := baseConfig()
	cfg.TopK, cfg.TopP = 10, 0.95
	all := generate(t, s, ps, cfg)
	again := generate(t, s, ps, cfg)
	alone := generate(t, s, ps[2:3], cfg)
	reordered := generate(t, s, [][]int32{ps[2], ps[0]}, cfg)
	for j := range 3 {
		want := all.Completions[2*3+j].Tokens
		for name, got := range map[string][]int32{
			"again": again.Completions[2*3+j].Tokens, "alone": alone.Completions[j].Tokens, "reordered": reordered.Completions[j].Tokens,
		} {
			if !slices.Equal(got, want) {
				t.Errorf("%s: completion %d = %v, want %v", name, j, got, want)
			}
		}
	}
	cfg.Seed++
	other := generate(t, s, ps, cfg)
	same := 0
	for k := range all.Completions {
		if slices.Equal(all.Completions[k].Tokens, other.Completions[k].Tokens) {
			same++
		}
	}
	if same == len(all.Completions) {
		t.Error("a different seed gave identical completions")
	}
}

// TestRecordedLogProbsMatchForward is DESIGN §6.2: the logprobs recorded while sampling equal
// the training forward's for the same tokens (|Δ| < 1e-4), each completion alone and all
// completions packed together with their prompts.
func TestRecordedLogProbsMatchForward(t *testing.T) {
	m := tinyModel(t, 10)
	s := NewSampler(m)
	ps := prompts(rand.New(rand.NewPCG(3, 3)), 6, 2, 11)
	cfg := baseConfig()
	cfg.Temperature = 0.7
	b := generate(t, s, ps, cfg)
	var packed gpt2.Batch
	var want []float32
	for _, c := range b.Completions {
		seq := append(slices.Clone(ps[c.Prompt]), c.Tokens...)
		var alone gpt2.Batch
		alone.Add(seq, len(ps[c.Prompt])-1)
		packed.Add(seq, len(ps[c.Prompt])-1)
		want = append(want, c.LogProbs...)
		var out gpt2.Output
		if err := m.Forward(&alone, cfg.Temperature, false, &out); err != nil {
			t.Fatal(err)
		}
		for i := range c.LogProbs {
			if d := math.Abs(float64(out.LogP[i] - c.LogProbs[i])); d > 1e-4 {
				t.Fatalf("alone: token %d logprob %g at sampling, %g in the forward", i, c.LogProbs[i], out.LogP[i])
			}
		}
	}
	var out gpt2.Output
	if err := m.Forward(&packed, cfg.Temperature, false, &out); err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i := range want {
		worst = max(worst, math.Abs(float64(out.LogP[i]-want[i])))
	}
	if worst > 1e-4 {
		t.Fatalf("packed: logprobs differ from sampling by up to %g", worst)
	}
	t.Logf("max |Δ logprob| sampling vs packed forward: %.2g", worst)
}

func TestGenerateErrors(t *testing.T) {
	s := NewSampler(tinyModel(t, 10))
	ctx := context.Background()
	good := [][]int32{{1, 2}}
	for name, c := range map[string]struct {
		ps  [][]int32
		cfg func(*Config)
	}{
		"zero group":        {good, func(c *Config) { c.Group = 0 }},
		"zero temperature":  {good, func(c *Config) { c.Temperature = 0 }},
		"top_p above 1":     {good, func(c *Config) { c.TopP = 1.5 }},
		"empty prompt":      {[][]int32{{}}, func(*Config) {}},
		"beyond context":    {[][]int32{make([]int32, 35)}, func(*Config) {}},
		"token outside":     {[][]int32{{99}}, func(*Config) {}},
		"stop outside":      {good, func(c *Config) { c.StopToken = 29 }},
		"no max new tokens": {good, func(c *Config) { c.MaxNewTokens = 0 }},
	} {
		cfg := baseConfig()
		c.cfg(&cfg)
		if _, err := s.Generate(ctx, c.ps, cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cfg := baseConfig()
	cfg.StopToken = 27 // rarely sampled, so a decode step is needed
	if _, err := s.Generate(cancelled, [][]int32{{1, 2, 3}}, cfg); err != context.Canceled {
		t.Errorf("cancelled context: %v", err)
	}
	if b, err := s.Generate(ctx, nil, baseConfig()); err != nil || len(b.Completions) != 0 {
		t.Errorf("no prompts: %v, %v", b, err)
	}
}

// TestShapingRecorded: a batch says how its tokens were drawn, and the description names
// every part of the shaping in effect.
func TestShapingRecorded(t *testing.T) {
	s := NewSampler(tinyModel(t, 1))
	ps := prompts(rand.New(rand.NewPCG(2, 2)), 3, 5)
	for _, c := range []struct {
		shape  Shaping
		shaped bool
		text   string
	}{
		{Shaping{}, false, "no shaping"},
		{Shaping{TopP: 1}, false, "no shaping"},
		{Shaping{TopK: 5}, true, "top_k = 5"},
		{Shaping{TopK: 5, TopP: 0.9}, true, "top_k = 5, top_p = 0.9"},
		{Shaping{Greedy: true}, true, "greedy = true"},
	} {
		cfg := baseConfig()
		cfg.Shaping = c.shape
		b := generate(t, s, ps, cfg)
		if b.Shaping != c.shape || b.Temperature != cfg.Temperature {
			t.Errorf("%+v: batch records %+v at temperature %g", c.shape, b.Shaping, b.Temperature)
		}
		if c.shape.Shaped() != c.shaped || c.shape.String() != c.text {
			t.Errorf("%+v: Shaped %v %q, want %v %q", c.shape, c.shape.Shaped(), c.shape.String(), c.shaped, c.text)
		}
	}
}

func TestValidateContext(t *testing.T) {
	cfg := baseConfig()
	cfg.MaxNewTokens = 39
	if err := cfg.ValidateContext(40); err != nil {
		t.Errorf("39 new tokens after a 1-token prompt fit 40: %v", err)
	}
	cfg.MaxNewTokens = 40
	if err := cfg.ValidateContext(40); err == nil || err.Error() != "rollout: max_new_tokens must be < 40 (the model's context, less one prompt token), got 40" {
		t.Errorf("40 new tokens in a context of 40: %v", err)
	}
}
