package luabind

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/rollout"
)

// The per-task view of frac_reward_zero_std: run:log, given the step's batch, writes
// no_signal/P and no_signal/A to metrics.jsonl and to the table it returns, and the run's
// summary prints their means beside frac_reward_zero_std's.
func TestNoSignalPerTask(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	var out strings.Builder
	e, err := New(Options{Stdout: &out, Trust: true, Args: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	// Groups 1 and 3 are P:, 2 and 4 A:. Every A: group ties; P: group 3 ties from step 3 on.
	src := `
local rook = require("rook")
local p = rook.load("random:tiny")
local opt = rook.adamw(p)
local run = assert(rook.run{ dir = "` + dir + `", policy = p, opt = opt, steps = 4 })
local P, A = "P: 4k3/8/8/8/8/8/8/4K3 w - - 0 1", "A: 4k3/8/8/8/8/8/8/4K3 w - - 0 1+e1e2+"
for step = 1, 4 do
  local b = p:rollout({ P, A, P, A }, { group = 2, max_new_tokens = 4, seed = step })
  local r = {}
  for i = 1, b.size do
    local g = math.floor((i - 1) / 2) + 1
    r[i] = (g % 2 == 0 or (g == 3 and step >= 3)) and 0.5 or i % 2
  end
  b:set_rewards(r)
  local m = run:log(step, rook.grpo.step(p, nil, opt, b, { beta = 0 }), b)
  assert(m["no_signal/A"] == 1, "run:log returns no_signal/A")
  assert(m["no_signal/P"] == (step >= 3 and 0.5 or 0), "no_signal/P at step " .. step .. ": " .. tostring(m["no_signal/P"]))
end
`
	if err := e.DoString(context.Background(), src, "signal.lua"); err != nil {
		t.Fatal(err)
	}
	e.Close()
	f, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(f)), "\n")
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if last["no_signal/P"] != 0.5 || last["no_signal/A"] != 1.0 || last["frac_reward_zero_std"] != 0.75 {
		t.Errorf("step 4's record: no_signal/P %v, no_signal/A %v, frac_reward_zero_std %v", last["no_signal/P"], last["no_signal/A"], last["frac_reward_zero_std"])
	}
	// frac_reward_zero_std: 0.5, 0.5, 0.75, 0.75; P: 0, 0, 0.5, 0.5; A: 1 throughout.
	want := "  no signal    0.62 of groups (frac_reward_zero_std, mean of 4 steps): P: 0.25, A: 1.00\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("the summary lacks %q:\n%s", want, out.String())
	}
}

// noSignal counts each task's groups whose advantages are all 0, skips prompts of neither
// task, and says nothing before advantages are set.
func TestNoSignalCounts(t *testing.T) {
	items := []item{{prompt: "P: 8/8/8/8/8/8/8/K1k5 w - - 0 1"}, {prompt: "A: 8/8/8/8/8/8/8/K1k5 w - - 0 1+a1a2+"},
		{prompt: "Q: what is chess?"}, {prompt: "P: 8/8/8/8/8/8/8/K1k5 w - - 0 1"}}
	var cs []rollout.Completion
	for i := range items {
		cs = append(cs, rollout.Completion{Prompt: i}, rollout.Completion{Prompt: i})
	}
	b := &batch{b: &rollout.Batch{Group: 2, Completions: cs}, items: items}
	if got := b.noSignal(); got != nil {
		t.Errorf("before advantages: %v, want nothing", got)
	}
	b.b.Advantages = []float64{0, 0, 0, 0, 0, 0, 1, -1}
	if got, want := b.noSignal(), map[string]float64{"no_signal/P": 0.5, "no_signal/A": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("noSignal = %v, want %v", got, want)
	}
	b.items, b.b.Completions, b.b.Advantages = items[2:3], []rollout.Completion{{Prompt: 0}, {Prompt: 0}}, []float64{0, 0}
	if got := b.noSignal(); len(got) != 0 {
		t.Errorf("no RookWorld prompt: %v, want no entry", got)
	}
	var s signalSummary
	if s.line() != "" {
		t.Error("a summary line without a step")
	}
}

// TestSignalSummaryDynamic: with dynamic sampling the summary's line adds what it dropped over
// the run and its draws a step; without, it says nothing of it.
func TestSignalSummaryDynamic(t *testing.T) {
	var s signalSummary
	s.add(map[string]float64{"frac_reward_zero_std": 0, "no_signal/P": 0, "dynamic/draws": 2, "dynamic/groups_drawn": 16, "dynamic/groups_dropped": 3})
	s.add(map[string]float64{"frac_reward_zero_std": 0, "no_signal/P": 0, "dynamic/draws": 1, "dynamic/groups_drawn": 8, "dynamic/groups_dropped": 0})
	want := "0.00 of groups (frac_reward_zero_std, mean of 2 steps): P: 0.00; dynamic sampling dropped 3 of 24 groups drawn, 1.50 draws a step"
	if got := s.line(); got != want {
		t.Errorf("line %q\nwant %q", got, want)
	}
	var off signalSummary
	off.add(map[string]float64{"frac_reward_zero_std": 0.25})
	if got := off.line(); strings.Contains(got, "dynamic") {
		t.Errorf("without dynamic sampling: %q", got)
	}
}
