package luabind

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/checkpoint"
)

// What a run shows while it learns: run:log(step, m, batch) writes the run's samples of each
// step to samples.jsonl and prints one every print_sample_every steps; a step without reward
// signal says why on its line, three in a row give a warning; and the run ends with a summary
// of what it did and where its outputs are.
func TestSamplesSignalAndSummary(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	var out strings.Builder
	e, err := New(Options{Stdout: &out, Trust: true, Args: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	src := `
local rook = require("rook")
local p = rook.load("random:tiny")
local opt = rook.adamw(p)
local run = assert(rook.run{ dir = "` + dir + `", policy = p, opt = opt, steps = 4, samples = 3, print_sample_every = 2 })
for step = 1, 4 do
  local b = p:rollout({ "P: 4k3/8/8/8/8/8/8/4K3 w - - 0 1", "A: 4k3/8/8/8/8/8/8/4K3 w - - 0 1+e1e2+" },
                      { group = 4, max_new_tokens = 4, seed = step })
  local r, fmt = {}, {}
  for i = 1, b.size do r[i], fmt[i] = step <= 3 and -0.3 or i % 2, 0 end
  b:set_rewards(r, { format = fmt })
  local m = rook.grpo.step(p, nil, opt, b, { beta = 0 })
  assert((m.no_signal_reason ~= nil) == (step <= 3), "no_signal_reason at step " .. step)
  run:log(step, m, b)
end
`
	if err := e.DoString(context.Background(), src, "samples.lua"); err != nil {
		t.Fatal(err)
	}
	e.Close() // the summary is printed when the run closes
	log := out.String()
	for _, want := range []string{
		"step 1/4", "NO SIGNAL: all 8 completions truncated at max_new_tokens=4; rewards all -0.3",
		"WARNING: 3 steps in a row without reward signal",
		"sample of step 2 · completion 1 (group 1, P) · reward -0.300 (format 0) · advantage +0 · 4 tokens, TRUNCATED",
		"  prompt      P: 4k3/8/8/8/8/8/8/4K3 w - - 0 1\n  completion  ",
		"sample of step 4",
		"run " + dir + ": steps 0→4 in ", "peak memory", "; 3 steps without reward signal",
		"  checkpoints  none saved", "  metrics      " + filepath.Join(dir, "metrics.jsonl"),
		"  samples      " + filepath.Join(dir, "samples.jsonl"), "  plot         rookscript plot " + dir,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(strings.Split(log, "step 4/4")[1], "NO SIGNAL") {
		t.Errorf("step 4 has a signal, but its line says otherwise:\n%s", log)
	}
	ss, err := checkpoint.ReadSamples(dir)
	if err != nil || len(ss) != 12 {
		t.Fatalf("%d samples (%v), want 3 a step", len(ss), err)
	}
	// Spread over the batch: completions 1, 3 and 6 of 8 (groups 1, 1 and 2).
	for i, want := range []struct{ index, group int }{{1, 1}, {3, 1}, {6, 2}} {
		if s := ss[9+i]; s.Step != 4 || s.Index != want.index || s.Group != want.group || s.Reward == nil || s.Advantage == nil || s.Components["format"] != 0 {
			t.Errorf("sample %d of step 4: %+v", i, s)
		}
	}
	if ss[11].Task != "A" || !strings.HasPrefix(ss[11].Prompt, "A: ") || *ss[11].Advantage == 0 {
		t.Errorf("last sample: %+v", ss[11])
	}
	if _, err := os.Stat(filepath.Join(dir, "metrics.jsonl")); err != nil {
		t.Error(err)
	}
}
