package rollout

import (
	"context"
	"slices"
	"testing"
)

// A rank of a data-parallel run samples a share of the batch's prompts; given each prompt's
// occurrence in the whole batch, every completion it samples is the one the whole batch has,
// token for token and logprob for logprob — repeated prompts included.
func TestShareSamplesWhatTheWholeBatchDoes(t *testing.T) {
	m := tinyModel(t, 1)
	prompts := [][]int32{{1, 2, 3}, {4, 5}, {1, 2, 3}, {6}, {1, 2, 3}}
	cfg := Config{Group: 3, MaxNewTokens: 6, Temperature: 1, Seed: 7, StopToken: 9}
	whole, err := NewSampler(m).Generate(context.Background(), prompts, cfg)
	if err != nil {
		t.Fatal(err)
	}
	occ := []int{0, 0, 1, 0, 2}
	for rank := range 2 {
		var share [][]int32
		var idx, o []int
		for i := rank; i < len(prompts); i += 2 {
			share, idx, o = append(share, prompts[i]), append(idx, i), append(o, occ[i])
		}
		c := cfg
		c.Occurrences = o
		b, err := NewSampler(m).Generate(context.Background(), share, c)
		if err != nil {
			t.Fatal(err)
		}
		for k, i := range idx {
			for j := range cfg.Group {
				got, want := b.Completions[k*cfg.Group+j], whole.Completions[i*cfg.Group+j]
				if !slices.Equal(got.Tokens, want.Tokens) || !slices.Equal(got.LogProbs, want.LogProbs) {
					t.Errorf("rank %d prompt %d completion %d: %v, the whole batch's %v", rank, i, j, got.Tokens, want.Tokens)
				}
			}
		}
	}
	if _, err := NewSampler(m).Generate(context.Background(), prompts, Config{Group: 1, MaxNewTokens: 2, Temperature: 1, Occurrences: []int{0}}); err == nil {
		t.Error("occurrences of the wrong length were accepted")
	}
}
