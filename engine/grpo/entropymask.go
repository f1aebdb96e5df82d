package grpo

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/rookscript/rookscript/engine/dist"
)

// Entropy-selected tokens (top_entropy_quantile ρ < 1, TRL's get_high_entropy_mask, after
// "Beyond the 80/20 rule"): only the tokens whose entropy is at or above the (1−ρ) quantile
// carry the policy term; ρ = 0.2 keeps the fifth of the tokens where the policy is least sure,
// the "forks" of a completion. The entropy term follows the same tokens, as TRL's does; the KL
// term keeps every token.
//
// TRL takes the quantile over each forward's batch, gathered over the processes. Here it is
// taken over the minibatch (every token it trains on, on every rank), so that micro_batch
// stays a memory setting that changes no number (DESIGN §6.5); with the minibatch in one
// forward the two are the same. The entropies come from a forward of the policy before the
// pass's gradients, so the mask is known when the fused head forms each token's gradient:
// one forward more per minibatch, and on a batch-invariant backend bit for bit the entropies
// the pass's own forward computes.

// entropyMask marks the high-entropy tokens of the pass's trained completions (k.highEntropy)
// and records the threshold and the counts in st: a forward of the policy, the quantile over
// the whole minibatch's tokens, the mask.
func (tr *Trainer) entropyMask(ctx context.Context, r passRun, train []*completion, st *stats) (selected int, err error) {
	_, ent, err := scoreParts(ctx, tr.Policy, &tr.batch, &tr.out, train, r.b.Temperature, r.cfg.MicroBatch, true)
	if err != nil {
		return 0, fmt.Errorf("grpo: the policy's entropies for top_entropy_quantile: %w", err)
	}
	all, err := gatherEntropies(tr.worldOf(), ent)
	if err != nil {
		return 0, err
	}
	thr, local := markHighEntropy(train, ent, all, r.cfg.TopEntropyQuantile)
	counts := []float64{float64(local)}
	if err := tr.worldOf().SumF64(counts); err != nil {
		return 0, err
	}
	selected = int(counts[0])
	st.maskPasses++
	st.maskThreshold += float64(thr)
	st.maskSelected += selected
	st.maskTokens += len(all)
	return selected, nil
}

// markHighEntropy sets the mask of each of train's completions from its entropies ent and
// the threshold that all (every rank's) give, and returns the threshold and how many of
// train's tokens it selected.
func markHighEntropy(train []*completion, ent [][]float32, all []float32, rho float64) (thr float32, selected int) {
	thr, ok := entropyThreshold(all, rho)
	for i, k := range train {
		k.highEntropy = make([]bool, len(ent[i]))
		for t, h := range ent[i] {
			if k.highEntropy[t] = ok && h >= thr; k.highEntropy[t] {
				selected++
			}
		}
	}
	return thr, selected
}

// entropyThreshold is the q = 1−ρ quantile of the entropies as torch.quantile computes it in
// float32 (linear interpolation between the two nearest ranks, torch's lerp); ok is false
// when there are none (no token carries the policy term then, as in TRL).
func entropyThreshold(entropies []float32, rho float64) (thr float32, ok bool) {
	if len(entropies) == 0 {
		return 0, false
	}
	sorted := slices.Clone(entropies)
	slices.Sort(sorted)
	q := float32(1 - rho)
	rank := float32(q * float32(len(sorted)-1))
	lo := int(rank)
	hi := int(math.Ceil(float64(rank)))
	w := float32(rank - float32(lo))
	a, b := sorted[lo], sorted[hi]
	if w < 0.5 { // aten's lerp, each operation rounded to float32 (the conversions forbid a fused FMA)
		return a + float32(w*float32(b-a)), true
	}
	return b - float32(float32(b-a)*float32(1-w)), true
}

// gatherEntropies is every rank's entropies, rank after rank: each rank writes its own at its
// offset of a sum (adding zeros is exact). The quantile does not depend on their order.
func gatherEntropies(c dist.Comm, ent [][]float32) ([]float32, error) {
	var mine []float32
	for _, e := range ent {
		mine = append(mine, e...)
	}
	if c.Size() == 1 {
		return mine, nil
	}
	counts := make([]float64, c.Size())
	counts[c.Rank()] = float64(len(mine))
	if err := c.SumF64(counts); err != nil {
		return nil, fmt.Errorf("grpo: gathering the entropies: %w", err)
	}
	off, total := 0, 0
	for r, n := range counts {
		if r < c.Rank() {
			off += int(n)
		}
		total += int(n)
	}
	all := make([]float32, total)
	copy(all[off:], mine)
	if err := c.SumF32(all); err != nil {
		return nil, fmt.Errorf("grpo: gathering the entropies: %w", err)
	}
	return all, nil
}
