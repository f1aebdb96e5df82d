package grpo

import (
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/rollout"
)

// NoRewardSignal names why a batch teaches nothing from its rewards, and says nothing when
// one completion it trains on has an advantage.
func TestNoRewardSignal(t *testing.T) {
	batch := func(group int, rewards []float64, truncated ...int) *rollout.Batch {
		b := &rollout.Batch{Group: group, MaxNewTokens: 48, Rewards: rewards}
		for i := range rewards {
			b.Completions = append(b.Completions, rollout.Completion{Prompt: i / group})
		}
		for _, i := range truncated {
			b.Completions[i].Truncated = true
		}
		return b
	}
	all := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	masked := DefaultConfig()
	masked.MaskTruncated = true
	for _, c := range []struct {
		name string
		b    *rollout.Batch
		cfg  Config
		want string // "" : a signal
	}{
		{"all truncated, one reward", batch(4, []float64{-0.3, -0.3, -0.3, -0.3, -0.3, -0.3, -0.3, -0.3}, all(8)...), DefaultConfig(),
			"all 8 completions truncated at max_new_tokens=48; rewards all -0.3"},
		{"equal within groups", batch(2, []float64{1, 1, 0.5, 0.5}), DefaultConfig(),
			"every group's rewards are equal (2 groups; rewards from 0.5 to 1)"},
		{"some truncated, one reward", batch(2, []float64{0, 0, 0, 0}, 1), DefaultConfig(),
			"1 of 4 completions truncated at max_new_tokens=48; rewards all 0"},
		{"masked away", batch(2, []float64{1, 0, 1, 0}, all(4)...), masked,
			"all 4 completions truncated at max_new_tokens=48; mask_truncated_completions leaves none to train on"},
		{"a signal", batch(2, []float64{1, 0, 0.5, 0.5}), DefaultConfig(), ""},
		{"a signal among truncated answers", batch(2, []float64{1, 0}, all(2)...), DefaultConfig(), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.b.Advantages, _ = Advantages(c.b.Rewards, c.b.Group, c.cfg)
			if got := NoRewardSignal(c.b, c.cfg); got != c.want {
				t.Errorf("got %q\nwant %q", got, c.want)
			}
		})
	}
	// Before a step has set the advantages there is nothing to say.
	if got := NoRewardSignal(batch(2, []float64{1, 1}), DefaultConfig()); got != "" {
		t.Errorf("without advantages: %q", got)
	}
	if !strings.Contains(NoRewardSignal(func() *rollout.Batch {
		b := batch(2, []float64{-0.3, -0.3}, 0, 1)
		b.Advantages = []float64{0, 0}
		return b
	}(), DefaultConfig()), "truncated") {
		t.Error("no reason for a batch of truncated answers")
	}
}
