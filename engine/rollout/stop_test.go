package rollout

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/chess"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
	"github.com/rookscript/rookscript/engine/rookworld"
)

// promotionFEN has a white pawn on e7: "e7e8" needs a promotion letter after it.
const promotionFEN = "4k3/4P3/8/8/8/8/8/4K3 w - - 0 1"

// tinyText is the tiny vocabulary's text, token by token; the stop token reads as GPT-2's.
var tinyText = func() [stop + 1]string {
	var t [stop + 1]string
	for i := range t {
		t[i] = string(rune('s'+i%7)) + strings.Repeat("z", i/7) // letters no rule or stop string reads
	}
	t[0], t[1], t[2] = " B: e7e8", "q", " B: a2a3" // a promotion, its letter, a complete move
	t[3], t[4], t[5], t[6] = "+", "+0", "c", "d"
	t[7] = "+0.001+0+0+" // an A: answer's four '+' in one token
	t[26] = rookworld.EnvPrompt(chess.StartFEN, "e2e4", nil)
	t[27] = rookworld.PolicyPrompt(promotionFEN, true)
	t[stop] = "<|endoftext|>"
	return t
}()

func decodeTiny(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(tinyText[id])
	}
	return b.String()
}

// firstStop is the reference for stop strings, written the slow way: the fewest tokens of
// toks whose text holds one of stops, and which; 0, "" if none does.
func firstStop(toks []int32, stops []string) (int, string) {
	for k := 1; k <= len(toks); k++ {
		text, best, at := decodeTiny(toks[:k]), "", len(decodeTiny(toks[:k]))+1
		for _, s := range stops {
			if i := strings.Index(text, s); i >= 0 && i+len(s) < at {
				best, at = s, i+len(s)
			}
		}
		if best != "" {
			return k, best
		}
	}
	return 0, ""
}

// checkForward is DESIGN §6.2 for a batch with stops: each completion's recorded logprobs are
// the forward's for exactly its kept tokens, bit for bit.
func checkForward(t *testing.T, m *gpt2.Model, b *Batch, temperature float32) {
	t.Helper()
	for k, c := range b.Completions {
		var pb gpt2.Batch
		p := b.Prompts[c.Prompt]
		pb.Add(append(slices.Clone(p), c.Tokens...), len(p)-1)
		var out gpt2.Output
		if err := m.Forward(&pb, temperature, false, &out); err != nil {
			t.Fatal(err)
		}
		if len(c.LogProbs) != len(c.Tokens) || gpt2test.FirstBitDiff(out.LogP, c.LogProbs) >= 0 {
			t.Fatalf("completion %d: %d tokens, %d recorded logprobs, not the forward's bits", k, len(c.Tokens), len(c.LogProbs))
		}
	}
}

// TestStopStrings: a completion ends with the token that completes a stop string — one that
// spans tokens ("cd") or ends inside one ("+" in "+0", kept whole) — and no earlier; it is
// finished, not truncated, has no stop token appended, and its text is exactly its tokens'.
// Completions ended by the stop token and by the limit are as before. Sampled and greedy.
func TestStopStrings(t *testing.T) {
	stops := []string{"cd", "+"}
	for _, greedy := range []bool{false, true} {
		m := gpt2test.Random(t, cpu.New(2), tinyConfig, 5, 1+9*float32(boolInt(greedy)))
		cfg := baseConfig()
		cfg.Group, cfg.MaxNewTokens, cfg.Greedy = 6, 16, greedy
		decoded := 0 // token ids decoded, to show each is read once
		cfg.Stop, cfg.Decode = stops, func(ids []int32) string { decoded += len(ids); return decodeTiny(ids) }
		ps := prompts(rand.New(rand.NewPCG(4, 4)), 3, 5, 1, 7)
		b := generate(t, NewSampler(m), ps, cfg)
		kept := 0
		for _, c := range b.Completions {
			kept += len(c.Tokens)
		}
		if decoded > b.Stats.NewTokens+kept {
			t.Fatalf("%d token ids decoded for %d sampled tokens and %d kept (the texts): text is read again", decoded, b.Stats.NewTokens, kept)
		}
		kinds := map[string]int{}
		for k, c := range b.Completions {
			n, s := firstStop(c.Tokens, stops)
			last := c.Tokens[len(c.Tokens)-1]
			switch {
			case c.Stop != "":
				kinds["stop string"]++
				if n != len(c.Tokens) || s != c.Stop || c.Truncated || last == stop || c.Text != decodeTiny(c.Tokens) {
					t.Fatalf("completion %d %v: ended by %q, truncated %v, text %q; the stop %q completes at token %d",
						k, c.Tokens, c.Stop, c.Truncated, c.Text, s, n)
				}
			case last == stop:
				kinds["stop token"]++
			case c.Truncated:
				kinds["truncated"]++
			default:
				t.Fatalf("completion %d: not finished, not truncated", k)
			}
			if c.Stop == "" && n > 0 {
				t.Fatalf("completion %d %v runs past the stop string %q at token %d", k, c.Tokens, s, n)
			}
		}
		if !greedy && (kinds["stop string"] == 0 || kinds["stop token"] == 0 || kinds["truncated"] == 0) {
			t.Fatalf("want completions of every kind in this fixture, got %v", kinds)
		}
		checkForward(t, m, b, cfg.Temperature)
		t.Logf("greedy %v: %v", greedy, kinds)
	}
}

// TestStopRuleRookWorld: under the RookWorld rule a completion of a P: prompt ends after "B:"
// and a complete move — with its promotion letter, or, when the next token shows there is
// none, at the token before, the extra token dropped with its logprob — and one of an A: prompt
// after its fourth '+'; a prompt of neither task is not stopped by the rule. Each ends as a
// fresh rule over its text says, finished, not truncated.
func TestStopRuleRookWorld(t *testing.T) {
	m := gpt2test.Random(t, cpu.New(2), tinyConfig, 5, 1)
	cfg := baseConfig()
	cfg.Group, cfg.MaxNewTokens = 16, 30
	cfg.StopRule, cfg.Decode = StopRuleRookWorld, decodeTiny
	ps := [][]int32{{27}, {26}, {8, 9}}
	b := generate(t, NewSampler(m), ps, cfg)
	kinds := map[string]int{}
	for k, c := range b.Completions {
		prompt := decodeTiny(ps[c.Prompt])
		if c.Stop == "" {
			if rule := rookworld.NewAnswerEnd(prompt); rule != nil && rule.Feed(c.Text) >= 0 {
				t.Fatalf("completion %d of prompt %d %v: the rule ends it, the sampler did not", k, c.Prompt, c.Tokens)
			}
			continue
		}
		if c.Stop != StopRuleRookWorld || c.Truncated || c.Prompt == 2 || len(c.Tokens) != len(c.LogProbs) {
			t.Fatalf("completion %d of prompt %d: stop %q, truncated %v", k, c.Prompt, c.Stop, c.Truncated)
		}
		rule := rookworld.NewAnswerEnd(prompt)
		for i, tok := range c.Tokens {
			end := rule.Feed(tinyText[tok])
			switch {
			case end > 0 && i == len(c.Tokens)-1:
				kinds[string(prompt[0])+": ends with its token"]++
			case end < 0 && i == len(c.Tokens)-1 && tok == 0:
				if rule.Feed(" ") != 0 {
					t.Fatalf("completion %d %v: ends waiting for no promotion", k, c.Tokens)
				}
				kinds["P: ended before a dropped token"]++
			case end >= 0 || i == len(c.Tokens)-1:
				t.Fatalf("completion %d %v: the rule ends it at token %d (%d bytes in), the sampler after token %d", k, c.Tokens, i, end, len(c.Tokens)-1)
			}
		}
	}
	for _, want := range []string{"P: ends with its token", "P: ended before a dropped token", "A: ends with its token"} {
		if kinds[want] == 0 {
			t.Fatalf("no completion where %q in this fixture: %v", want, kinds)
		}
	}
	checkForward(t, m, b, cfg.Temperature)
	t.Logf("%v", kinds)
}
