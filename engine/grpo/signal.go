package grpo

import (
	"fmt"
	"math"
	"strings"

	"github.com/rookscript/rookscript/engine/rollout"
)

// NoRewardSignal says why a scored batch, after a step set its advantages, teaches the policy
// nothing from its rewards — every completion trained on has an advantage of 0, or none is
// trained on — or returns "" when some completion carries a reward signal. A run of such
// steps only moves the policy by its KL and entropy terms: the usual causes are answers cut
// by max_new_tokens (every reward the malformed penalty) and a reward that cannot tell a
// group's completions apart.
func NoRewardSignal(b *rollout.Batch, cfg Config) string {
	n := len(b.Completions)
	if n == 0 || len(b.Advantages) != n {
		return ""
	}
	truncated, trained := 0, 0
	for i, c := range b.Completions {
		if c.Truncated {
			truncated++
		}
		masked := cfg.MaskTruncated && c.Truncated
		if !masked && b.Advantages[i] != 0 {
			return ""
		}
		if !masked {
			trained++
		}
	}
	var why []string
	switch {
	case truncated == n:
		why = append(why, fmt.Sprintf("all %d completions truncated at max_new_tokens=%d", n, b.MaxNewTokens))
	case truncated > 0:
		why = append(why, fmt.Sprintf("%d of %d completions truncated at max_new_tokens=%d", truncated, n, b.MaxNewTokens))
	}
	if trained == 0 {
		why = append(why, "mask_truncated_completions leaves none to train on")
		return strings.Join(why, "; ")
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range b.Rewards {
		lo, hi = min(lo, r), max(hi, r)
	}
	if lo == hi {
		why = append(why, fmt.Sprintf("rewards all %.3g", lo))
	} else {
		why = append(why, fmt.Sprintf("every group's rewards are equal (%d groups; rewards from %.3g to %.3g)", n/max(b.Group, 1), lo, hi))
	}
	return strings.Join(why, "; ")
}
