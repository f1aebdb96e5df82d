package rollout

import (
	"context"
	"fmt"
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

// TestRecordedLogProbsMatchForward is DESIGN §6.1 and §6.2: the logprobs recorded while
// sampling are the training forward's for the same tokens bit for bit, whatever the batch the
// forward meets them in — each completion alone (1 row of scored tokens up), the first k
// completions packed for every k, all of them in reverse order (mixed lengths before and
// after), each group as GRPO packs it (the prompt once, the completions continuing it), the LM
// head in chunks of 1, 5 and 16 rows (boundaries inside sequences) — on 1 and 3 threads, and
// the sampler on 1 and 3 threads records the same tokens and logprobs. Any difference is a
// bug, not rounding: the forward is batch-invariant (engine/backend/cpu).
func TestRecordedLogProbsMatchForward(t *testing.T) {
	const seed, scale = 5, 10
	ps := prompts(rand.New(rand.NewPCG(3, 3)), 6, 2, 11, 1)
	cfg := baseConfig()
	cfg.Group, cfg.MaxNewTokens, cfg.Temperature = 4, 16, 0.7
	var b *Batch
	for _, threads := range []int{1, 3} {
		m := gpt2test.Random(t, cpu.New(threads), tinyConfig, seed, scale)
		got := generate(t, NewSampler(m), ps, cfg)
		if b == nil {
			b = got
			continue
		}
		for k, c := range got.Completions {
			if !slices.Equal(c.Tokens, b.Completions[k].Tokens) || gpt2test.FirstBitDiff(c.LogProbs, b.Completions[k].LogProbs) >= 0 {
				t.Fatalf("completion %d: sampling on %d threads records other tokens or logprobs than on 1", k, threads)
			}
		}
	}
	seqOf := func(c Completion) []int32 { return append(slices.Clone(ps[c.Prompt]), c.Tokens...) }
	rows := 0
	for _, c := range b.Completions {
		rows += len(seqOf(c))
	}
	if rows <= 96 {
		t.Fatalf("the packed batch has %d rows: want more than 96, where products once changed kernel", rows)
	}
	type packing struct {
		name  string
		batch gpt2.Batch
		want  []float32 // the recorded logprobs of its scored rows, in row order
	}
	var packings []packing
	add := func(name string, comps []int, shared bool) {
		p := packing{name: name}
		for i, k := range comps {
			c := b.Completions[k]
			prompt := ps[c.Prompt]
			switch {
			case !shared || len(prompt) == 1:
				p.batch.Add(seqOf(c), len(prompt)-1)
			case i == 0 || b.Completions[comps[i-1]].Prompt != c.Prompt:
				// As GRPO packs a group: its prompt but the last token once, then each
				// completion from that last token.
				p.batch.Add(prompt[:len(prompt)-1], len(prompt))
				fallthrough
			default:
				p.batch.AddContinuation(append([]int32{prompt[len(prompt)-1]}, c.Tokens...), 0)
			}
			p.want = append(p.want, c.LogProbs...)
		}
		packings = append(packings, p)
	}
	all := make([]int, len(b.Completions))
	for k := range all {
		add(fmt.Sprintf("completion %d alone", k), []int{k}, false)
		all[k] = k
		add(fmt.Sprintf("the first %d packed", k+1), all[:k+1], false)
	}
	reversed := slices.Clone(all)
	slices.Reverse(reversed)
	add("all, last first", reversed, false)
	add("groups sharing their prompts", all, true)
	for _, threads := range []int{1, 3} {
		m := gpt2test.Random(t, cpu.New(threads), tinyConfig, seed, scale)
		for _, headRows := range []int{0, 1, 5, 16} {
			m.HeadRows = headRows
			for _, p := range packings {
				var out gpt2.Output
				if err := m.Forward(&p.batch, cfg.Temperature, false, &out); err != nil {
					t.Fatal(err)
				}
				if i := gpt2test.FirstBitDiff(out.LogP, p.want); i >= 0 {
					t.Fatalf("%s, %d threads, head chunks of %d: scored row %d: logprob %g at sampling, %g in the forward (Δ %.2g)",
						p.name, threads, headRows, i, p.want[i], out.LogP[i], out.LogP[i]-p.want[i])
				}
			}
		}
	}
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
		"empty stop string": {good, func(c *Config) { c.Stop, c.Decode = []string{"x", ""}, decodeTiny }},
		"unknown stop rule": {good, func(c *Config) { c.StopRule, c.Decode = "chess", decodeTiny }},
		"stop without text": {good, func(c *Config) { c.Stop = []string{"x"} }},
		"rule without text": {good, func(c *Config) { c.StopRule = StopRuleRookWorld }},
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

// TestBatchRecordsItsSettings: a batch carries every setting it was drawn with, for a batch
// of prompts and for an empty one, and a later change to the config's stop list does not
// reach it.
func TestBatchRecordsItsSettings(t *testing.T) {
	s := NewSampler(tinyModel(t, 1))
	for name, ps := range map[string][][]int32{"prompts": prompts(rand.New(rand.NewPCG(3, 3)), 2, 4), "none": nil} {
		cfg := baseConfig()
		cfg.Shaping, cfg.Stop, cfg.StopRule, cfg.Decode = Shaping{TopK: 4}, []string{"xy"}, StopRuleRookWorld, decodeTiny
		b := generate(t, s, ps, cfg)
		cfg.Stop[0] = "changed"
		got := Config{Group: b.Group, MaxNewTokens: b.MaxNewTokens, Temperature: b.Temperature, Shaping: b.Shaping,
			Seed: b.Seed, Stop: b.Stop, StopRule: b.StopRule}
		want := baseConfig()
		want.Shaping, want.Stop, want.StopRule = Shaping{TopK: 4}, []string{"xy"}, StopRuleRookWorld
		want.StopToken = 0
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: the batch records %+v, want %+v", name, got, want)
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
