package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tinyArm is what every arm of a test ablation gets: the tiny random model, one step.
var tinyArm = []string{"pass.prompts=2", "pass.group=4", "pass.max_new_tokens=12", "pass.eval_size=6",
	"pass.stockfish.depth=4", "pass.micro_batch=8", "steps=1"}

// ablate runs recipes/ablate.lua in process and returns its exit code, stdout and stderr.
func ablate(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(append([]string{"--quiet", "../../recipes/ablate.lua"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// finalTable is the ablation's table, without the reasons listed under it (a collect knows
// less of why an arm failed than the run that saw it fail) and without its wall_s row (the
// seconds an arm took, different for any two runs).
func finalTable(t *testing.T, out string) string {
	t.Helper()
	i := strings.LastIndex(out, "final evaluation of each arm")
	if i < 0 {
		t.Fatalf("no ablation table:\n%s", out)
	}
	table, _, _ := strings.Cut(out[i:], "FAILED:\n")
	table = regexp.MustCompile(`(?m)^wall_s .*\n`).ReplaceAllString(table, "")
	return table
}

// TestAblate: a grid of a dotted section setting and a value that fails one arm at load. The
// failed arms are marked in the table and the others keep their columns; the exit code says
// that arms failed. Run one arm per process (arm=K), then collect=true: the same table, read
// from the arms' run directories.
func TestAblate(t *testing.T) {
	tmp := t.TempDir()
	grid := append([]string{`grid.rollout.temperature=[0.5]`, `grid.model=["random:tiny", "random:nope"]`}, tinyArm...)
	whole := filepath.Join(tmp, "whole")
	code, out, errOut := ablate(t, append([]string{"base_dir=" + whole}, grid...)...)
	if code != 1 || !strings.Contains(errOut, "ablate: 1 of 2 arm(s) FAILED") {
		t.Fatalf("exit %d, want 1 with the failed arms counted; stderr:\n%s", code, errOut)
	}
	table := finalTable(t, out)
	for _, col := range []string{"before", "model=random:tiny,rollout.temperature=0.5", "model=random:nope,rollout.temperature=0.5 FAILED"} {
		if !strings.Contains(table, col) {
			t.Errorf("the table lacks column %q:\n%s", col, table)
		}
	}
	// Under the evaluations, how each arm trained: the tiny model's answers all score the
	// malformed floor, so every group it trained on tied; nothing was dropped, one draw a step.
	for _, row := range []string{`no_signal +- +1\.000 \[[\d.]+, 1\.000\] +- `, `dropped +- +0\.000 \[0\.000, [\d.]+\] +- `,
		`draws +- +1\.000 +- `, `wall_s +- +[\d.]+ +- `} {
		if !regexp.MustCompile(row).MatchString(out) {
			t.Errorf("the table lacks the training row %s:\n%s", row, out)
		}
	}
	if !strings.Contains(table, "reward_mean     -0.300") || !strings.Contains(out, `arm 2 (model=random:nope,rollout.temperature=0.5, `+whole+`/02): `) ||
		!strings.Contains(out, `unknown random model "nope"`) {
		t.Errorf("the finished arms' numbers or the failed arms' reasons are missing:\n%s", out)
	}
	// The dotted key reached the recipe's rollout section (its default is 0.7).
	var cfg struct{ Rollout struct{ Temperature float64 } }
	b, err := os.ReadFile(filepath.Join(whole, "01", "config.json"))
	if err := errors.Join(err, json.Unmarshal(b, &cfg)); err != nil || cfg.Rollout.Temperature != 0.5 {
		t.Errorf("arm 1 recorded rollout.temperature %g (%v), want 0.5", cfg.Rollout.Temperature, err)
	}

	split := filepath.Join(tmp, "split")
	args := append([]string{"base_dir=" + split}, grid...)
	for k, want := range []int{0, 1} {
		code, _, errOut := ablate(t, append(args, fmt.Sprintf("arm=%d", k+1))...)
		if code != want {
			t.Fatalf("arm=%d: exit %d, want %d\n%s", k+1, code, want, errOut)
		}
	}
	code, out, errOut = ablate(t, append(args, "collect=true")...)
	if code != 1 || finalTable(t, out) != table {
		t.Fatalf("collect: exit %d (want 1), table\n%s\nwant\n%s\n%s", code, finalTable(t, out), table, errOut)
	}
	if !strings.Contains(out, "arm 2 (model=random:nope,rollout.temperature=0.5, "+split+"/02): no run in "+split+"/02") {
		t.Errorf("collect does not say why arm 2 failed:\n%s", out)
	}
	// collect reads the runs: a finished arm's evaluations from its last checkpoint (answers and
	// all: the table has its intervals, which metrics.jsonl could not give) ...
	if !regexp.MustCompile(`reward_mean +-0\.300 \[-0\.300, -0\.300\] +-0\.300 \[`).MatchString(out) {
		t.Errorf("collect lost arm 1's intervals:\n%s", out)
	}
	// ... and without a checkpoint, the numbers of its metrics.jsonl: change its last evaluation.
	if err := os.Rename(filepath.Join(split, "01", "checkpoints"), filepath.Join(split, "01", "moved")); err != nil {
		t.Fatal(err)
	}
	metrics := filepath.Join(split, "01", "metrics.jsonl")
	b, _ = os.ReadFile(metrics)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, `"eval/reward_mean":-0.3}`) {
		t.Fatalf("arm 1's last record is not its final evaluation: %s", last)
	}
	lines[len(lines)-1] = strings.Replace(last, `"eval/reward_mean":-0.3}`, `"eval/reward_mean":0.25}`, 1)
	os.WriteFile(metrics, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	if _, out, _ = ablate(t, append(args, "collect=true")...); !regexp.MustCompile(`reward_mean +-0\.300 +0\.250 `).MatchString(out) {
		t.Errorf("collect did not read arm 1's metrics.jsonl:\n%s", out)
	}
}

// TestAblateRefusesBadArm: one arm's value breaks a rule of the recipe; the ablation refuses
// before any arm runs, naming the arm and the key, and creates no run directory.
func TestAblateRefusesBadArm(t *testing.T) {
	base := filepath.Join(t.TempDir(), "runs")
	code, _, errOut := ablate(t, append([]string{"base_dir=" + base, "pass.model=random:tiny", "grid.kl_warmup=[0, -1]",
		"grid.stockfish.depth=[4]"}, tinyArm...)...)
	if code == 0 || !strings.Contains(errOut, "arm 2 (kl_warmup=-1,stockfish.depth=4): ") || !strings.Contains(errOut, "kl_warmup must be") ||
		strings.Contains(errOut, "arm 1 (") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	if _, err := os.Stat(base); err == nil {
		t.Errorf("a refused ablation created %s", base)
	}
}

// TestDiagnoseExitCode: a failed check makes diagnose exit 1, naming it; an overfit without
// any reward signal is skipped, not passed.
func TestDiagnoseExitCode(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"--quiet", "../../recipes/diagnose.lua", "model=random:tiny", "prompts=2", "group=4",
		"max_new_tokens=12", "overfit_steps=2", "stockfish.depth=4"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "diagnose: ") || !strings.Contains(errOut.String(), "model is trained, not random") {
		t.Errorf("exit %d, stderr %q; want 1 naming the failed check", code, errOut.String())
	}
	for _, want := range []string{"FAIL  model is trained, not random", "SKIP  overfitting one batch raises the reward      no reward signal"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
