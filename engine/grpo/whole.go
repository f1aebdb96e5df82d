package grpo

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/rookscript/rookscript/engine/dist"
	"github.com/rookscript/rookscript/engine/rollout"
)

// A data-parallel step: each rank holds a share of the batch's groups (rollout.Batch.Groups),
// and every decision that depends on the whole batch is taken on the whole batch, the same on
// every rank: its advantages (a batch-scaled std included), which completions it trains and
// counts, its minibatches and their denominators, whether it carries a signal, its metrics.
// Each rank backpropagates its own share with the whole minibatch's denominators; the
// gradients are summed over the ranks (dist: bit for bit the same sum on every rank) before
// the norm, the clip and AdamW, so every rank applies the same update to the same weights. A
// world of one takes the same path with nothing to exchange.

// worldOf is the trainer's world: one rank when no Comm is set.
func (tr *Trainer) worldOf() dist.Comm {
	if tr.Comm == nil {
		return dist.Single{}
	}
	return tr.Comm
}

// wholeBatch is what a step decides on: b itself on one rank; on several, a batch holding
// every completion's length, truncation, reward and reward components in the whole batch's
// order (group by global index), gathered from the ranks' shares. Its Completions carry no
// tokens, only their count.
func wholeBatch(c dist.Comm, b *rollout.Batch) (*rollout.Batch, error) {
	if c.Size() == 1 {
		if b.Groups != nil && b.TotalGroups != len(b.Prompts) {
			return nil, fmt.Errorf("grpo: a share of %d groups of %d, on one rank", len(b.Prompts), b.TotalGroups)
		}
		return b, nil
	}
	g, groups := b.Group, b.WholeGroups()
	n := groups * g
	names, err := componentNames(c, b)
	if err != nil {
		return nil, err
	}
	// One vector, every rank filling its completions' slots: length, truncated, reward, then
	// each component; the sum over the ranks is the whole batch (other ranks' slots are 0).
	fields := 3 + len(names)
	v := make([]float64, fields*n)
	for i, cp := range b.Completions {
		gi := b.GlobalGroup(i/g)*g + i%g
		v[gi] = float64(len(cp.Tokens))
		if cp.Truncated {
			v[n+gi] = 1
		}
		if b.Rewards != nil { // a batch trained by primitives may carry advantages alone
			v[2*n+gi] = b.Rewards[i]
		}
		for f, name := range names {
			if vals, ok := b.Components[name]; ok {
				v[(3+f)*n+gi] = vals[i]
			} else {
				v[(3+f)*n+gi] = math.NaN() // does not apply to this share's completions
			}
		}
	}
	if err := c.SumF64(v); err != nil {
		return nil, fmt.Errorf("grpo: gathering the batch: %w", err)
	}
	w := &rollout.Batch{Group: g, Temperature: b.Temperature, Shaping: b.Shaping, MaxNewTokens: b.MaxNewTokens,
		Completions: make([]rollout.Completion, n), Rewards: v[2*n : 3*n]}
	for gi := range n {
		w.Completions[gi] = rollout.Completion{Prompt: gi / g, Tokens: make([]int32, int(v[gi])), Truncated: v[n+gi] != 0}
	}
	if len(names) > 0 {
		w.Components = map[string][]float64{}
		for f, name := range names {
			w.Components[name] = v[(3+f)*n : (4+f)*n]
		}
	}
	return w, nil
}

// gatherAdvantages is adv (one per completion of this rank's share b) for the whole batch,
// in its order: adv itself on one rank.
func gatherAdvantages(c dist.Comm, b, whole *rollout.Batch, adv []float64) ([]float64, error) {
	if c.Size() == 1 {
		return adv, nil
	}
	g := b.Group
	v := make([]float64, len(whole.Completions))
	for i := range b.Completions {
		v[b.GlobalGroup(i/g)*g+i%g] = adv[i] // other ranks' slots are 0: the sum is exact
	}
	if err := c.SumF64(v); err != nil {
		return nil, fmt.Errorf("grpo: gathering the advantages: %w", err)
	}
	return v, nil
}

// componentNames are the reward components of the whole batch: every name a rank's share
// has (a component applies to one task, and a share may hold one task only), sorted. A share
// without one has NaN there, as a batch has for the completions a component does not apply to.
func componentNames(c dist.Comm, b *rollout.Batch) ([]string, error) {
	names := make([]string, 0, len(b.Components))
	for k := range b.Components {
		names = append(names, k)
	}
	mine, _ := json.Marshal(names)
	all, err := dist.Gather(c, mine)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for r, raw := range all {
		var theirs []string
		if err := json.Unmarshal(raw, &theirs); err != nil {
			return nil, fmt.Errorf("grpo: rank %d's reward components: %w", r, err)
		}
		for _, k := range theirs {
			set[k] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}

// localIndex maps the whole batch's completion gi to this share's, or -1 when another rank
// holds it.
func localIndex(b *rollout.Batch) func(gi int) int {
	if b.Groups == nil {
		return func(gi int) int { return gi }
	}
	at := make(map[int]int, len(b.Groups))
	for i, g := range b.Groups {
		at[g] = i
	}
	return func(gi int) int {
		if i, ok := at[gi/b.Group]; ok {
			return i*b.Group + gi%b.Group
		}
		return -1
	}
}

// reduceStats sums the ranks' token statistics and takes their extremes, so that every rank
// reports the whole step's.
func reduceStats(c dist.Comm, st *stats) error {
	if c.Size() == 1 {
		return nil
	}
	sums := []float64{float64(st.n), st.ratioSum, st.ratioSq, st.klSum, st.entSum,
		float64(st.clipLow), float64(st.clipHigh), float64(st.klClamped)}
	if err := c.SumF64(sums); err != nil {
		return err
	}
	st.n, st.ratioSum, st.ratioSq, st.klSum, st.entSum = int(sums[0]), sums[1], sums[2], sums[3], sums[4]
	st.clipLow, st.clipHigh, st.klClamped = int(sums[5]), int(sums[6]), int(sums[7])
	ext, err := maxima(c, []float64{st.ratioMax, -st.ratioMin, st.klMax, st.maxAbsLogRatio})
	if err != nil {
		return err
	}
	st.ratioMax, st.ratioMin, st.klMax, st.maxAbsLogRatio = ext[0], -ext[1], ext[2], ext[3]
	return nil
}

// maxima is the element-wise maximum of x over the ranks: each rank's x in its own slots of a
// sum (adding zeros is exact), the maximum taken from the gathered values.
func maxima(c dist.Comm, x []float64) ([]float64, error) {
	k := len(x)
	all := make([]float64, k*c.Size())
	copy(all[c.Rank()*k:], x)
	if err := c.SumF64(all); err != nil {
		return nil, err
	}
	out := slices.Clone(all[:k])
	for r := 1; r < c.Size(); r++ {
		for i := range k {
			if v := all[r*k+i]; v > out[i] || math.IsNaN(v) {
				out[i] = v
			}
		}
	}
	return out, nil
}
