package luabind

import (
	"fmt"
	"slices"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/rookworld"
)

// Per-task reward signal. frac_reward_zero_std says how many of a step's groups tie (every
// advantage 0, so they train nothing); in a batch that mixes RookWorld's tasks it does not say
// which task ties. run:log, given the step's batch, adds no_signal/P and no_signal/A: the
// share of each task's groups without signal, and the run summary prints their means.

// signalTasks are the tasks reported, in order, by their prompt prefix.
var signalTasks = []struct {
	task rookworld.Task
	name string
}{{rookworld.TaskPolicy, "P"}, {rookworld.TaskEnv, "A"}}

// noSignal returns "no_signal/<task>" for each RookWorld task among the batch's prompts: the
// fraction of that task's groups whose advantages are all 0, the groups frac_reward_zero_std
// counts. It needs the advantages a GRPO step (or the recipe) set, and returns nothing
// without them; a task with no group in the batch has no entry. On a data-parallel rank it
// counts that rank's share of the batch.
func (b *batch) noSignal() map[string]float64 {
	bb := b.b
	g := bb.Group
	if g <= 0 || len(bb.Advantages) != len(bb.Completions) || len(bb.Completions)%g != 0 {
		return nil
	}
	groups, tied := map[rookworld.Task]int{}, map[rookworld.Task]int{}
	for start := 0; start < len(bb.Completions); start += g {
		c := bb.Completions[start]
		if c.Prompt < 0 || c.Prompt >= len(b.items) {
			continue
		}
		task, err := rookworld.DetectTask(b.items[c.Prompt].prompt)
		if err != nil {
			continue // not a RookWorld prompt
		}
		groups[task]++
		tie := true
		for _, a := range bb.Advantages[start : start+g] {
			tie = tie && a == 0
		}
		if tie {
			tied[task]++
		}
	}
	out := map[string]float64{}
	for _, t := range signalTasks {
		if n := groups[t.task]; n > 0 {
			out["no_signal/"+t.name] = float64(tied[t.task]) / float64(n)
		}
	}
	return out
}

// addNoSignal adds noSignal's entries to a step's metrics: to m, which run:log writes, and to
// t, the recipe's table that run:log returns (in a fixed order), so that a curriculum can
// read them.
func (b *batch) addNoSignal(m map[string]float64, t *lua.LTable) {
	ns := b.noSignal()
	for _, task := range signalTasks {
		k := "no_signal/" + task.name
		if v, ok := ns[k]; ok {
			m[k] = v
			t.RawSetString(k, lua.LNumber(v))
		}
	}
}

// signalSummary accumulates a run's no-signal fractions over the steps it logs.
type signalSummary struct {
	sum   map[string]float64
	steps map[string]int
}

var signalKeys = []string{"frac_reward_zero_std", "no_signal/P", "no_signal/A",
	"dynamic/draws", "dynamic/groups_drawn", "dynamic/groups_dropped"}

func (s *signalSummary) add(m map[string]float64) {
	for _, k := range signalKeys {
		if v, ok := m[k]; ok {
			if s.sum == nil {
				s.sum, s.steps = map[string]float64{}, map[string]int{}
			}
			s.sum[k] += v
			s.steps[k]++
		}
	}
}

// line is the summary's line, "" when no step reported frac_reward_zero_std; a task's mean is
// over the steps that had its groups; with dynamic sampling, what it dropped to get there:
//
//	no signal    0.27 of groups (frac_reward_zero_std, mean of 60 steps): P: 0.05, A: 0.49
//	no signal    0.00 of groups (frac_reward_zero_std, mean of 60 steps): P: 0.00, A: 0.00; dynamic sampling dropped 36 of 640 groups drawn, 1.33 draws a step
func (s *signalSummary) line() string {
	n := s.steps["frac_reward_zero_std"]
	if n == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%.2f of groups (frac_reward_zero_std, mean of %d steps)", s.sum["frac_reward_zero_std"]/float64(n), n)
	sep := ": "
	for _, t := range signalTasks {
		k := "no_signal/" + t.name
		if s.steps[k] == 0 {
			continue
		}
		fmt.Fprintf(&b, "%s%s: %.2f", sep, t.name, s.sum[k]/float64(s.steps[k]))
		sep = ", "
	}
	if d := s.steps["dynamic/draws"]; d > 0 {
		fmt.Fprintf(&b, "; dynamic sampling dropped %.0f of %.0f groups drawn, %.2f draws a step",
			s.sum["dynamic/groups_dropped"], s.sum["dynamic/groups_drawn"], s.sum["dynamic/draws"]/float64(d))
	}
	return b.String()
}

// rook.grpo.signal(batch [, settings]) → for each group of the whole batch (every rank's
// share, in order), whether it carries a reward signal: some advantage rook.grpo.step would
// give it under settings is not 0. A group whose rewards tie by the step's rule (advantage.go:
// std ≤ max(1e-6, 1e-8·max|r|), TRL's std ≤ 1e-8 with trl_compat) does not; it is what
// frac_reward_zero_std counts and drop_zero_std drops. The batch's advantages are left as they
// were.
func (e *Env) luaGRPOSignal(L *lua.LState) int {
	b := checkBatch(L, 1)
	cfg := settingsArg[grpo.Config](L, 2, "grpo", "rook.grpo.signal")
	keep := b.b.Advantages
	adv, err := grpo.StepAdvantages(e.world(), b.b, cfg)
	b.b.Advantages = keep
	if err != nil {
		L.RaiseError("rook.grpo.signal: %s", err.Error())
	}
	g := b.b.Group
	signal := make([]float64, b.b.WholeGroups())
	for i := range b.b.Prompts {
		if slices.ContainsFunc(adv[i*g:(i+1)*g], func(a float64) bool { return a != 0 }) {
			signal[b.b.GlobalGroup(i)] = 1
		}
	}
	if c := e.world(); c.Size() > 1 { // each rank's groups in their slots: the sum is the whole batch's
		if err := c.SumF64(signal); err != nil {
			L.RaiseError("rook.grpo.signal: %s", err.Error())
		}
	}
	t := L.CreateTable(len(signal), 0)
	for _, s := range signal {
		t.Append(lua.LBool(s > 0))
	}
	L.Push(t)
	return 1
}
