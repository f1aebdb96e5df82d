package rollout

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// joinParts are two scored batches of one model, drawn with different seeds: the first with
// reward components a and b, the second with a alone.
func joinParts(t *testing.T) (*Batch, *Batch, *Sampler) {
	t.Helper()
	s := NewSampler(tinyModel(t, 1))
	cfg := baseConfig()
	b1 := generate(t, s, prompts(rand.New(rand.NewPCG(1, 2)), 3, 5, 2), cfg)
	cfg.Seed = 8
	b2 := generate(t, s, prompts(rand.New(rand.NewPCG(3, 4)), 4, 1), cfg)
	score := func(b *Batch, base float64, names ...string) {
		b.Rewards = make([]float64, len(b.Completions))
		b.Components = map[string][]float64{}
		for i := range b.Rewards {
			b.Rewards[i] = base + float64(i)
		}
		for k, name := range names {
			v := make([]float64, len(b.Completions))
			for i := range v {
				v[i] = base + float64(10*k+i)
			}
			b.Components[name] = v
		}
	}
	score(b1, 100, "a", "b")
	score(b2, 200, "a")
	return b1, b2, s
}

// A joined batch holds each picked group whole, in pick order: its prompt, its completions
// as sampled (tokens, log-probabilities, how they ended), their rewards and components, NaN
// for a component its batch lacks; the settings, the first batch's seed, the cost of every
// batch; no advantages; and it counts as sampled by the model that sampled its groups.
func TestJoinKeepsWholeGroups(t *testing.T) {
	b1, b2, s := joinParts(t)
	b1.Advantages = make([]float64, len(b1.Completions))
	picks := []Pick{{Part: 1, Group: 1}, {Part: 0, Group: 0}, {Part: 0, Group: 2}}
	j, err := Join([]*Batch{b1, b2}, picks)
	if err != nil {
		t.Fatal(err)
	}
	g := b1.Group
	if len(j.Prompts) != 3 || len(j.Completions) != 3*g || j.Group != g || j.Groups != nil || j.Advantages != nil {
		t.Fatalf("joined: %d prompts, %d completions, group %d, groups %v, advantages %v", len(j.Prompts), len(j.Completions), j.Group, j.Groups, j.Advantages)
	}
	for i, pk := range picks {
		src := []*Batch{b1, b2}[pk.Part]
		if !slices.Equal(j.Prompts[i], src.Prompts[pk.Group]) {
			t.Errorf("group %d: prompt %v, want %v", i, j.Prompts[i], src.Prompts[pk.Group])
		}
		for k := range g {
			got, want := j.Completions[i*g+k], src.Completions[pk.Group*g+k]
			if got.Prompt != i || !slices.Equal(got.Tokens, want.Tokens) || !slices.Equal(got.LogProbs, want.LogProbs) ||
				got.Text != want.Text || got.Truncated != want.Truncated || got.Stop != want.Stop {
				t.Errorf("group %d completion %d: %+v, want %+v with prompt %d", i, k, got, want, i)
			}
			if r, w := j.Rewards[i*g+k], src.Rewards[pk.Group*g+k]; r != w {
				t.Errorf("group %d completion %d: reward %g, want %g", i, k, r, w)
			}
			if a, w := j.Components["a"][i*g+k], src.Components["a"][pk.Group*g+k]; a != w {
				t.Errorf("group %d completion %d: component a %g, want %g", i, k, a, w)
			}
			bv := j.Components["b"][i*g+k]
			if w, ok := src.Components["b"]; ok && bv != w[pk.Group*g+k] || !ok && !math.IsNaN(bv) {
				t.Errorf("group %d completion %d: component b %g (its batch has b: %v)", i, k, bv, ok)
			}
		}
	}
	if j.Seed != b1.Seed || j.Temperature != b1.Temperature || j.MaxNewTokens != b1.MaxNewTokens {
		t.Errorf("joined seed %d, temperature %g, max_new_tokens %d; the first batch's: %d, %g, %d",
			j.Seed, j.Temperature, j.MaxNewTokens, b1.Seed, b1.Temperature, b1.MaxNewTokens)
	}
	if want := b1.Stats.NewTokens + b2.Stats.NewTokens; j.Stats.NewTokens != want || j.Stats.Seconds != b1.Stats.Seconds+b2.Stats.Seconds {
		t.Errorf("joined stats %+v, want the sum of %+v and %+v", j.Stats, b1.Stats, b2.Stats)
	}
	if !j.SampledBy(s.Model) {
		t.Error("a join of batches its model sampled does not count as sampled by it")
	}
	j.Completions[0].Tokens[0]++
	if j.Completions[0].Tokens[0] == b2.Completions[g].Tokens[0] {
		t.Error("the joined batch shares its tokens with the batch it came from")
	}
}

// Whether the joined batch counts as sampled by a model depends on the batches that give it
// groups only: one whose log-probabilities were edited makes it not, unless none of its
// groups is picked; a batch received from another rank counts once marked SampledLike.
func TestJoinSampledBy(t *testing.T) {
	b1, b2, s := joinParts(t)
	b2.Edited()
	for _, c := range []struct {
		name  string
		picks []Pick
		want  bool
	}{
		{"the edited batch gives no group", []Pick{{0, 1}, {0, 0}}, true},
		{"the edited batch gives a group", []Pick{{0, 1}, {1, 0}}, false},
		{"no group", nil, false},
	} {
		j, err := Join([]*Batch{b1, b2}, c.picks)
		if err != nil {
			t.Fatal(err)
		}
		if got := j.SampledBy(s.Model); got != c.want {
			t.Errorf("%s: sampled by the model %v, want %v", c.name, got, c.want)
		}
	}
	recv := &Batch{Prompts: b2.Prompts, Group: b2.Group, Temperature: b2.Temperature, MaxNewTokens: b2.MaxNewTokens,
		Completions: b2.Completions, Rewards: b2.Rewards}
	recv.SampledLike(b1)
	j, err := Join([]*Batch{b1, recv}, []Pick{{0, 1}, {1, 0}})
	if err != nil || !j.SampledBy(s.Model) {
		t.Errorf("with a batch marked SampledLike: sampled by the model %v (%v)", err == nil && j.SampledBy(s.Model), err)
	}
}

// No picks give an empty batch that keeps its group size and the cost of the draws; a share
// of a data-parallel batch joins into a whole batch.
func TestJoinEmptyAndShares(t *testing.T) {
	b1, b2, _ := joinParts(t)
	j, err := Join([]*Batch{b1, b2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Completions) != 0 || j.Group != b1.Group || j.Rewards == nil || j.Stats.NewTokens != b1.Stats.NewTokens+b2.Stats.NewTokens {
		t.Errorf("no picks: %d completions, group %d, rewards %v, stats %+v", len(j.Completions), j.Group, j.Rewards, j.Stats)
	}
	b1.Groups, b1.TotalGroups = []int{1, 3, 5}, 6
	j, err = Join([]*Batch{b1}, []Pick{{0, 2}})
	if err != nil || j.Groups != nil || j.WholeGroups() != 1 {
		t.Errorf("a share joined: groups %v of %d (%v), want a whole batch of 1", j.Groups, j.WholeGroups(), err)
	}
}

// Join refuses, naming the batch, the pick or the setting: batches sampled with other
// settings, scored and not, of inconsistent shapes; picks outside them or twice the same.
func TestJoinErrors(t *testing.T) {
	for _, c := range []struct {
		name       string
		edit       func(b1, b2 *Batch)
		picks      []Pick
		part, pick int
		setting    string
	}{
		{"temperature", func(_, b2 *Batch) { b2.Temperature = 0.5 }, nil, 1, -1, "temperature"},
		{"group", func(_, b2 *Batch) { b2.Group = 1 }, nil, 1, -1, "group"},
		{"top_p", func(_, b2 *Batch) { b2.Shaping.TopP = 0.9 }, nil, 1, -1, "top_p"},
		{"max_new_tokens", func(_, b2 *Batch) { b2.MaxNewTokens++ }, nil, 1, -1, "max_new_tokens"},
		{"stop", func(_, b2 *Batch) { b2.Stop = []string{"\n"} }, nil, 1, -1, "stop"},
		{"stop_rule", func(_, b2 *Batch) { b2.StopRule = StopRuleRookWorld }, nil, 1, -1, "stop_rule"},
		{"unscored", func(_, b2 *Batch) { b2.Rewards = nil }, nil, 1, -1, ""},
		{"rewards short", func(b1, _ *Batch) { b1.Rewards = b1.Rewards[1:] }, nil, 0, -1, ""},
		{"component short", func(_, b2 *Batch) { b2.Components["a"] = b2.Components["a"][1:] }, nil, 1, -1, ""},
		{"no such batch", func(_, _ *Batch) {}, []Pick{{0, 0}, {2, 0}}, -1, 1, ""},
		{"no such group", func(_, _ *Batch) {}, []Pick{{1, 2}}, -1, 0, ""},
		{"picked twice", func(_, _ *Batch) {}, []Pick{{0, 1}, {1, 1}, {0, 1}}, -1, 2, ""},
	} {
		b1, b2, _ := joinParts(t)
		c.edit(b1, b2)
		_, err := Join([]*Batch{b1, b2}, c.picks)
		var je *JoinError
		if !errors.As(err, &je) || je.Part != c.part || je.Pick != c.pick || je.Setting != c.setting {
			t.Errorf("%s: %v, want a JoinError of part %d, pick %d, setting %q", c.name, err, c.part, c.pick, c.setting)
		}
	}
	var je *JoinError
	if _, err := Join(nil, nil); !errors.As(err, &je) {
		t.Errorf("no batches: %v, want a JoinError", err)
	}
}
