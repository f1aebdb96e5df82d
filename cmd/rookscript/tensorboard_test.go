//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rookscript/rookscript/engine/checkpoint"
	"github.com/rookscript/rookscript/internal/tbread"
)

// TestTensorBoardMatchesMetrics: the main job's run directory, through a rollback (two
// non-finite steps), a resume that continues it, a crash after a step its checkpoint does not
// hold and the resume after that, leaves tb/ event files that an independent decoder reads,
// with TensorBoard's purge at each session start, as exactly what metrics.jsonl holds: every
// train and eval value as a float32 under the same name, at the same step and time; one text
// of each step's samples.jsonl completions; the config as text and hparams.
func TestTensorBoardMatchesMetrics(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	runDir := filepath.Join(tmp, "run")
	env := []string{"DRILL_RECIPE=" + grpoRecipe, "DRILL_NAN_AT=3,4"}
	code, out, errOut := rookscript(t, tmp, env, append([]string{"--trust", drillRecipe, "run_dir=" + runDir, "steps=6", "save_every=2"}, faultRun...)...)
	wantExit(t, "rollback drill", code, 0, out, errOut)
	wantContains(t, "stdout", out, "rolled back to step-00000002", "tensorboard --logdir "+runDir)

	code, out, errOut = rookscript(t, tmp, nil, grpoRecipe, "resume="+runDir, "steps=8")
	wantExit(t, "resume to step 8", code, 0, out, errOut)

	p := start(t, tmp, nil, grpoRecipe, "resume="+runDir, "steps=12")
	p.waitFor(t, "step 11/12") // its checkpoint is step 10's
	p.signal(t, syscall.SIGKILL)
	p.wait()
	code, out, errOut = rookscript(t, tmp, nil, grpoRecipe, "resume="+runDir)
	wantExit(t, "resume after SIGKILL", code, 0, out, errOut)
	wantContains(t, "stdout", out, "resumed "+runDir+" at step 10")
	if got, want := metricsSteps(t, runDir), "0e "+seq(1, 6)+" 6e 7 8 8e "+seq(9, 12)+" 12e"; got != want {
		t.Fatalf("metrics.jsonl: %s, want %s", got, want)
	}

	names, files, err := tbread.ReadDir(filepath.Join(runDir, "tb"))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 4 {
		t.Fatalf("event files %q, want one per process that opened the run", names)
	}
	// Each file starts a session where its process's history starts: the new run at 0, a
	// rollback at the step after its checkpoint, a resume at the step after its checkpoint.
	var starts []int64
	for _, evs := range files {
		for _, e := range evs {
			if e.Session == 1 {
				starts = append(starts, e.Step)
			}
		}
	}
	if want := []int64{0, 3, 7, 9, 11}; !slices.Equal(starts, want) {
		t.Errorf("session starts %v, want %v", starts, want)
	}

	view := tbread.PythonView(files)
	checkScalars(t, runDir, view, "metrics.jsonl")
	checkTexts(t, runDir, view, files[0])
	// RustBoard drops a tag's later values when the tag is logged again at an earlier step,
	// and ignores session starts: a tag that only the rolled-back steps logged (the
	// non-finite steps' nonfinite_grad) keeps those values, which metrics-discarded.jsonl
	// holds. Every other tag shows the same curve.
	rust := tbread.RustView(files)
	only := map[string][]tbread.Point{}
	for tag, ps := range rust {
		if len(view[tag]) == 0 {
			only[tag] = ps
			continue
		}
		if !slices.EqualFunc(ps, view[tag], samePoint) {
			t.Errorf("RustBoard's view of %q differs: %v, python's %v", tag, ps, view[tag])
		}
	}
	if len(only) == 0 {
		t.Error("no tag of the rolled-back steps alone: the test no longer shows what RustBoard keeps")
	}
	checkScalars(t, runDir, only, checkpoint.DiscardedMetricsFile)
}

func samePoint(a, b tbread.Point) bool {
	return a.Step == b.Step && a.Text == b.Text && a.Wall == b.Wall &&
		(a.Value == b.Value || math.IsNaN(float64(a.Value)) && math.IsNaN(float64(b.Value)))
}

// checkScalars compares every scalar tag's points with a metrics file: metrics.jsonl, every
// name of it; metrics-discarded.jsonl, the tags of view.
func checkScalars(t *testing.T, runDir string, view map[string][]tbread.Point, file string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, file))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]tbread.Point{}
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("metrics.jsonl: %v: %s", err, line)
		}
		step, _ := rec["step"].(json.Number).Int64()
		when, err := time.Parse(time.RFC3339Nano, rec["time"].(string))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range rec {
			if k == "step" || k == "time" {
				continue
			}
			var f float64
			switch x := v.(type) {
			case json.Number:
				f, _ = x.Float64()
			case string: // "NaN", "Infinity", "-Infinity"
				f = map[string]float64{"NaN": math.NaN(), "Infinity": math.Inf(1), "-Infinity": math.Inf(-1)}[x]
			}
			want[k] = append(want[k], tbread.Point{Step: step, Value: float32(f), Wall: float64(when.UnixNano()) / 1e9})
		}
	}
	if file == checkpoint.DiscardedMetricsFile {
		for tag, ps := range view {
			if !slices.EqualFunc(ps, want[tag], samePoint) {
				t.Errorf("%q: RustBoard shows %v, %s has %v", tag, ps, file, want[tag])
			}
		}
		return
	}
	for tag, ps := range want {
		if !slices.EqualFunc(view[tag], ps, samePoint) {
			t.Errorf("%q: TensorBoard shows %v, metrics.jsonl has %v", tag, view[tag], ps)
		}
	}
	for tag, ps := range view {
		if _, ok := want[tag]; !ok && len(ps) > 0 && ps[0].Text == "" {
			t.Errorf("scalar %q is not in metrics.jsonl", tag)
		}
	}
	if len(want) < 20 || len(want["eval/reward_mean"]) != 4 || len(want["loss"]) != 12 {
		t.Fatalf("metrics.jsonl has %d names, eval/reward_mean at %d steps, loss at %d: not the run this test means", len(want), len(want["eval/reward_mean"]), len(want["loss"]))
	}
}

// checkTexts compares the samples texts with samples.jsonl, and finds the config.
func checkTexts(t *testing.T, runDir string, view map[string][]tbread.Point, first []tbread.Event) {
	t.Helper()
	ss, err := checkpoint.ReadSamples(runDir)
	if err != nil {
		t.Fatal(err)
	}
	byStep := map[int64][]checkpoint.Sample{}
	for _, s := range ss {
		byStep[int64(s.Step)] = append(byStep[int64(s.Step)], s)
	}
	texts := view["samples"]
	if len(texts) != len(byStep) || len(texts) != 12 {
		t.Fatalf("%d samples texts, samples.jsonl has %d steps", len(texts), len(byStep))
	}
	for _, p := range texts {
		for _, s := range byStep[p.Step] {
			for _, line := range strings.Split(s.String(), "\n") {
				if !strings.Contains(p.Text, "    "+line+"\n") && !strings.HasSuffix(p.Text, "    "+line) {
					t.Fatalf("step %d's text lacks %q:\n%s", p.Step, line, p.Text)
				}
			}
		}
	}
	cfg, err := os.ReadFile(filepath.Join(runDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	configs := view["config"]
	if len(configs) == 0 || !strings.Contains(configs[len(configs)-1].Text, `    "positions": "generator"`) ||
		!strings.Contains(configs[len(configs)-1].Text, fmt.Sprintf("    %s", strings.Split(strings.TrimSpace(string(cfg)), "\n")[1])) {
		t.Errorf("config texts %v", configs)
	}
	hparams := 0
	for _, e := range first {
		for _, v := range e.Values {
			if v.Plugin == "hparams" {
				hparams++
			}
		}
	}
	if hparams != 1 {
		t.Errorf("%d hparams summaries in the first file, want 1", hparams)
	}
}

// tensorboard = false writes no tb directory.
func TestTensorBoardOff(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	recipe := filepath.Join(tmp, "off.lua")
	os.WriteFile(recipe, []byte(`local rook = require("rook")
local policy = assert(rook.load("random:tiny"))
local run = assert(rook.run{ dir = "`+filepath.Join(tmp, "run")+`", policy = policy, opt = rook.adamw(policy), tensorboard = false })
run:log(1, { loss = 1 })
`), 0o644)
	code, out, errOut := rookscript(t, tmp, nil, "--trust", recipe)
	wantExit(t, "tensorboard = false", code, 0, out, errOut)
	if _, err := os.Stat(filepath.Join(tmp, "run", "tb")); !os.IsNotExist(err) {
		t.Fatalf("tensorboard = false left %v", err)
	}
	if strings.Contains(out, "tensorboard --logdir") {
		t.Errorf("the summary names TensorBoard files that were not written:\n%s", out)
	}
}
