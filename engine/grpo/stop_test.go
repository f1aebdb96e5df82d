package grpo

import (
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/rollout"
)

// stopText reads the tiny vocabulary as text: a letter per token, "+" in two of them.
func stopText(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		switch id {
		case 3:
			b.WriteString("+")
		case 4:
			b.WriteString("x+y")
		default:
			b.WriteByte(byte('a' + id))
		}
	}
	return b.String()
}

// TestFirstMinibatchInvariantsWithStops is DESIGN §6.1 and §6.2 on a batch whose completions
// end every way: at a stop string (their tokens ending with the token that completed it, kept
// whole where the string ends inside it, no stop token appended), at the stop token, and at
// the token limit. The step scores exactly the kept tokens: the ratio is 1 and the KL to the
// initial policy 0, bit for bit, before the first update.
func TestFirstMinibatchInvariantsWithStops(t *testing.T) {
	for _, est := range []KLEstimator{KLK1, KLK3} {
		for _, mb := range []int{1, 3} {
			tr, b := setupSampled(t, 1, rollout.Config{Group: 4, MaxNewTokens: 10, Temperature: 0.9, Stop: []string{"+"}, Decode: stopText})
			kinds := map[string]int{}
			for _, c := range b.Completions {
				switch last := c.Tokens[len(c.Tokens)-1]; {
				case c.Stop != "":
					kinds["stop string"]++
					if last == stop || c.Truncated || !strings.Contains(stopText(c.Tokens), "+") {
						t.Fatalf("a completion ended by %q: tokens %v, truncated %v", c.Stop, c.Tokens, c.Truncated)
					}
				case last == stop:
					kinds["stop token"]++
				case c.Truncated:
					kinds["truncated"]++
				}
			}
			if kinds["stop string"] == 0 || kinds["stop token"] == 0 || kinds["truncated"] == 0 {
				t.Fatalf("want completions of every kind in this fixture, got %v", kinds)
			}
			cfg := DefaultConfig()
			cfg.Beta, cfg.KLEstimator, cfg.MicroBatch = 0.1, est, mb
			m := step(t, tr, b, cfg)
			if v := m["ratio/first_max_abs_log"]; v != 0 {
				t.Errorf("%s, micro-batches of %d: max |log ratio| on the first minibatch = %g, want 0.0", est, mb, v)
			}
			if v := m["kl/first_max"]; v != 0 || m["clip_ratio/region_mean"] != 0 {
				t.Errorf("%s, micro-batches of %d: KL to the initial policy %g, clip fraction %g, want 0.0", est, mb, v, m["clip_ratio/region_mean"])
			}
			if m["updates"] != 1 || m["finite"] != 1 {
				t.Errorf("%s: metrics %v", est, m)
			}
		}
	}
}
