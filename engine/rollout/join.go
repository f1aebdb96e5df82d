package rollout

import (
	"fmt"
	"math"
	"slices"

	"github.com/rookscript/rookscript/engine/gpt2"
)

// Joining batches: a batch made of chosen groups of several (DAPO's dynamic sampling keeps the
// groups whose rewards differ, from as many rollouts as it takes). A group moves whole — its
// prompt, its completions with the log-probabilities their sampler recorded, their rewards and
// reward components — so that a step trains on it exactly as on the batch it was drawn in.

// Pick is one group of a joined batch: group Group (0-based, an index of Prompts) of the
// batch Part (0-based) among those joined.
type Pick struct{ Part, Group int }

// JoinError is a join Join refuses. Part is the batch at fault (0-based; -1 for the picks as
// a whole), Pick the pick (0-based; -1 for none), Setting the sampling setting in which the
// part differs from the first one, by its Config name ("" for another reason).
type JoinError struct {
	Part, Pick int
	Setting    string
	Reason     string
}

func (e *JoinError) Error() string {
	var where string
	switch {
	case e.Pick >= 0:
		where = fmt.Sprintf("pick %d", e.Pick+1)
	case e.Part >= 0:
		where = fmt.Sprintf("batch %d", e.Part+1)
	default:
		where = "the batches"
	}
	if e.Setting != "" {
		return fmt.Sprintf("rollout: join: %s was sampled with another %s: %s", where, e.Setting, e.Reason)
	}
	return fmt.Sprintf("rollout: join: %s: %s", where, e.Reason)
}

// Join returns the batch of the picked groups, in pick order, each group at most once. It
// holds each group's prompt and its completions (tokens, recorded log-probabilities, text, how
// each ended; copies), their rewards and reward components, and the settings the parts were
// sampled with, which must be the same (group, temperature, top_k, top_p, greedy,
// max_new_tokens, stop, stop_rule). A component that a part giving groups lacks is NaN for
// that part's completions, as for a completion it does not apply to. The parts are all scored
// or none is. Seed is the first part's, and Stats the sum of every part's, picked or not: what
// drawing the joined batch cost. The joined batch counts as sampled by a model (SampledBy)
// when every part that gives it a group was sampled by that model at its current weights: its
// log-probabilities are still the ones the sampler recorded. It has no advantages (a step sets
// its own) and is a whole batch (Groups nil), whatever the parts were.
func Join(parts []*Batch, picks []Pick) (*Batch, error) {
	if len(parts) == 0 {
		return nil, &JoinError{Part: -1, Pick: -1, Reason: "no batch to join"}
	}
	first := parts[0]
	for i, p := range parts {
		if err := joinable(first, p, i); err != nil {
			return nil, err
		}
	}
	seen, used := map[Pick]bool{}, make([]bool, len(parts))
	for k, pk := range picks {
		if pk.Part < 0 || pk.Part >= len(parts) {
			return nil, &JoinError{Part: -1, Pick: k, Reason: fmt.Sprintf("there is no batch %d (%d are joined)", pk.Part+1, len(parts))}
		}
		if n := len(parts[pk.Part].Prompts); pk.Group < 0 || pk.Group >= n {
			return nil, &JoinError{Part: -1, Pick: k, Reason: fmt.Sprintf("batch %d has no group %d (it has %d)", pk.Part+1, pk.Group+1, n)}
		}
		if seen[pk] {
			return nil, &JoinError{Part: -1, Pick: k, Reason: fmt.Sprintf("group %d of batch %d is picked twice", pk.Group+1, pk.Part+1)}
		}
		seen[pk], used[pk.Part] = true, true
	}

	g, scored := first.Group, first.Rewards != nil
	out := &Batch{Group: g, Temperature: first.Temperature, Shaping: first.Shaping, MaxNewTokens: first.MaxNewTokens,
		Seed: first.Seed, Stop: slices.Clone(first.Stop), StopRule: first.StopRule,
		Prompts: make([][]int32, 0, len(picks)), Completions: make([]Completion, 0, len(picks)*g)}
	for _, p := range parts {
		out.Stats.Seconds += p.Stats.Seconds
		out.Stats.PrefillTokens += p.Stats.PrefillTokens
		out.Stats.NewTokens += p.Stats.NewTokens
		out.Stats.DecodeSteps += p.Stats.DecodeSteps
		out.Stats.RiderTokens += p.Stats.RiderTokens
	}
	if scored {
		out.Rewards = make([]float64, 0, len(picks)*g)
	}
	var names []string
	for i, p := range parts {
		if !used[i] {
			continue
		}
		for name := range p.Components {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	if len(names) > 0 {
		out.Components = make(map[string][]float64, len(names))
	}
	for i, pk := range picks {
		p := parts[pk.Part]
		out.Prompts = append(out.Prompts, slices.Clone(p.Prompts[pk.Group]))
		lo, hi := pk.Group*g, (pk.Group+1)*g
		for _, c := range p.Completions[lo:hi] {
			c.Prompt, c.Tokens, c.LogProbs = i, slices.Clone(c.Tokens), slices.Clone(c.LogProbs)
			out.Completions = append(out.Completions, c)
		}
		if scored {
			out.Rewards = append(out.Rewards, p.Rewards[lo:hi]...)
		}
		for _, name := range names {
			v, ok := p.Components[name]
			if !ok {
				v = slices.Repeat([]float64{math.NaN()}, len(p.Completions))
			}
			out.Components[name] = append(out.Components[name], v[lo:hi]...)
		}
	}
	// Sampled by one model at its current weights when every part giving groups was.
	var sampler *gpt2.Model
	var gen uint64
	common, found := true, false
	for i, p := range parts {
		if !used[i] {
			continue
		}
		if !found {
			sampler, gen, found = p.sampler, p.samplerGen, true
		}
		common = common && p.sampler != nil && p.sampler == sampler && p.samplerGen == gen
	}
	if found && common {
		out.sampler, out.samplerGen = sampler, gen
	}
	return out, nil
}

// joinable checks that part i can be joined with the first part: it was sampled with the
// first part's settings, its completions form its groups, its rewards and components are one
// per completion, and it is scored as the first part is.
func joinable(first, p *Batch, i int) error {
	differs := func(setting string, a, b any) error {
		return &JoinError{Part: i, Pick: -1, Setting: setting, Reason: fmt.Sprintf("%v, the first batch %v", b, a)}
	}
	switch {
	case p.Group != first.Group:
		return differs("group", first.Group, p.Group)
	case p.Temperature != first.Temperature:
		return differs("temperature", first.Temperature, p.Temperature)
	case p.Shaping.TopK != first.Shaping.TopK:
		return differs("top_k", first.Shaping.TopK, p.Shaping.TopK)
	case p.Shaping.TopP != first.Shaping.TopP:
		return differs("top_p", first.Shaping.TopP, p.Shaping.TopP)
	case p.Shaping.Greedy != first.Shaping.Greedy:
		return differs("greedy", first.Shaping.Greedy, p.Shaping.Greedy)
	case p.MaxNewTokens != first.MaxNewTokens:
		return differs("max_new_tokens", first.MaxNewTokens, p.MaxNewTokens)
	case !slices.Equal(p.Stop, first.Stop):
		return differs("stop", first.Stop, p.Stop)
	case p.StopRule != first.StopRule:
		return differs("stop_rule", first.StopRule, p.StopRule)
	}
	n := len(p.Completions)
	switch {
	case p.Group < 1 || n != len(p.Prompts)*p.Group:
		return &JoinError{Part: i, Pick: -1, Reason: fmt.Sprintf("%d completions are not %d prompts' groups of %d", n, len(p.Prompts), p.Group)}
	case p.Rewards != nil && len(p.Rewards) != n:
		return &JoinError{Part: i, Pick: -1, Reason: fmt.Sprintf("%d rewards for %d completions", len(p.Rewards), n)}
	case p.Rewards != nil && first.Rewards == nil:
		return &JoinError{Part: i, Pick: -1, Reason: "scored, the first batch not: join batches scored alike"}
	case p.Rewards == nil && first.Rewards != nil:
		return &JoinError{Part: i, Pick: -1, Reason: "not scored, the first batch is: join batches scored alike"}
	}
	for name, v := range p.Components {
		if len(v) != n {
			return &JoinError{Part: i, Pick: -1, Reason: fmt.Sprintf("reward component %s has %d values for %d completions", name, len(v), n)}
		}
	}
	for k, c := range p.Completions {
		if c.Prompt != k/p.Group {
			return &JoinError{Part: i, Pick: -1, Reason: fmt.Sprintf("completion %d belongs to prompt %d, not %d: completions must come in their prompts' order", k+1, c.Prompt+1, k/p.Group+1)}
		}
	}
	return nil
}

// SampledLike records that b's completions were sampled by the model that sampled src, at the
// weights it has now: what a share of a batch received from another rank of a data-parallel
// run is, whose policy applies the same updates to the same weights as this rank's. The
// first update's forward is then held to b's recorded log-probabilities bit for bit, as to
// src's (DESIGN §6.1).
func (b *Batch) SampledLike(src *Batch) { b.sampler, b.samplerGen = src.sampler, src.samplerGen }
