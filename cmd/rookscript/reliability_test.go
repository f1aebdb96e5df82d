//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The fault-injection suite: the real binary, run on a tiny random model with a real
// Stockfish, meets a failed save, a second writer, resumes with and without overrides, a
// SIGKILL, SIGINT and SIGTERM, and a recovery policy that rolls back and stops. Each test
// checks the exit code, what the run says, and what it leaves on disk. docs/RELIABILITY.md
// is the table of these tests.

var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// rookscriptBinary builds the binary once for the test package.
func rookscriptBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		if binary.dir, binary.err = os.MkdirTemp("", "rookscript-bin-"); binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "rookscript")
		out, err := exec.Command("go", "build", "-o", binary.path, ".").CombinedOutput()
		if err != nil {
			binary.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

func removeBinary() {
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
}

var (
	grpoRecipe, _ = filepath.Abs("../../recipes/grpo_stable.lua")
	sftRecipe, _  = filepath.Abs("../../recipes/sft.lua")
	drillRecipe   = mustAbs("testdata/drill.lua")
)

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return a
}

// proc is a running rookscript. Its stdout and stderr lines go to one channel, in order per
// stream, so a test can wait for a line before acting.
type proc struct {
	cmd            *exec.Cmd
	lines          chan string
	stdout, stderr bytes.Buffer
	mu             sync.Mutex
	wg             sync.WaitGroup
}

func start(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	// A guard, not a measurement: a regression that makes a run build the default model
	// (minutes) or hang fails here instead of at the test binary's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	p := &proc{cmd: exec.CommandContext(ctx, rookscriptBinary(t), args...), lines: make(chan string, 1024)}
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), env...)
	outPipe, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill() })
	read := func(r io.Reader, buf *bytes.Buffer) {
		defer p.wg.Done()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.mu.Lock()
			buf.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}
	p.wg.Add(2)
	go read(outPipe, &p.stdout)
	go read(errPipe, &p.stderr)
	go func() { p.wg.Wait(); close(p.lines) }()
	return p
}

// waitFor returns once the process prints a line containing s; it fails the test if the
// process ends first. (The deadline only keeps a broken build from hanging CI.)
func (p *proc) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				code, out, errOut := p.wait()
				t.Fatalf("rookscript ended (exit %d) before printing %q\nstdout:\n%s\nstderr:\n%s", code, s, out, errOut)
			}
			if strings.Contains(line, s) {
				return
			}
		case <-deadline:
			t.Fatalf("no line with %q", s)
		}
	}
}

func (p *proc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the process and returns its exit code, stdout and stderr.
func (p *proc) wait() (int, string, string) {
	for range p.lines {
	}
	err := p.cmd.Wait()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return code, p.stdout.String(), p.stderr.String()
}

// rookscript runs the binary to its end.
func rookscript(t *testing.T, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	return start(t, dir, env, args...).wait()
}

// faultRun is tinyRun made smaller still: these tests look at what a run does with its steps,
// not at what it learns.
var faultRun = []string{"model=random:tiny", "prompts=1", "group=2", "max_new_tokens=8", "eval_size=2",
	"stockfish.depth=1", "stockfish.workers=1", "micro_batch=8"}

// tinyGRPO is the recipe's command line on the tiny model, writing run_dir.
func tinyGRPO(runDir string, extra ...string) []string {
	return append(append([]string{grpoRecipe, "run_dir=" + runDir}, faultRun...), extra...)
}

func wantExit(t *testing.T, what string, code, want int, out, errOut string) {
	t.Helper()
	if code != want {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, code, want, out, errOut)
	}
}

func wantContains(t *testing.T, what, text string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Fatalf("%s lacks %q:\n%s", what, p, text)
		}
	}
}

// metricsSteps reads a run's metrics.jsonl as the step of each record, evaluations marked
// with an "e" ("0e 1 2 3 3e"), the notation of the reliability table.
func metricsSteps(t *testing.T, runDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("metrics.jsonl: %v: %s", err, line)
		}
		s := fmt.Sprint(rec["step"])
		for k := range rec {
			if strings.HasPrefix(k, "eval/") {
				s += "e"
				break
			}
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// seq is "from from+1 … n".
func seq(from, n int) string {
	var s []string
	for i := from; i <= n; i++ {
		s = append(s, fmt.Sprint(i))
	}
	return strings.Join(s, " ")
}

// checkpointState reads a checkpoint's state.json body.
func checkpointState(t *testing.T, runDir string, step int) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "checkpoints", fmt.Sprintf("step-%08d", step), "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var env struct{ State map[string]any }
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	return env.State
}

// 1. A save into a directory that refuses writes: a file where checkpoints/ should be. The
// recipe stops with an error naming the file and the cause, and exits 1; a recipe that
// catches the error and ends normally still exits 1.
func TestFaultFailedSave(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	runDir := filepath.Join(tmp, "run")
	env := []string{"DRILL_RECIPE=" + grpoRecipe, "DRILL_BREAK_SAVE_AT=2", "DRILL_RUN_DIR=" + runDir}
	code, out, errOut := rookscript(t, tmp, env, append([]string{"--trust", drillRecipe, "run_dir=" + runDir, "steps=3", "save_every=2"}, faultRun...)...)
	wantExit(t, "grpo_stable.lua with checkpoints/ replaced by a file", code, 1, out, errOut)
	wantContains(t, "stderr", errOut, "run:save(2): saving checkpoint step-00000002 in "+runDir, filepath.Join(runDir, "checkpoints"), "not a directory")

	code, out, errOut = rookscript(t, tmp, nil, mustAbs("testdata/swallowed_save.lua"), "run_dir="+filepath.Join(tmp, "swallowed"))
	wantExit(t, "a recipe that catches its failed save", code, 1, out, errOut)
	wantContains(t, "stdout", out, "caught:\tfalse")
	wantContains(t, "stderr", errOut, "the last checkpoint save failed", "not a directory")
}

// 2. A second writer of the same run directory, as a new run or a resume, is refused with the
// holder's pid while the first runs, and the lock goes with the holder's death by SIGKILL.
func TestFaultSecondWriter(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	runDir := filepath.Join(tmp, "run")
	busy := mustAbs("testdata/busy.lua")
	holder := start(t, tmp, nil, busy, "run_dir="+runDir)
	holder.waitFor(t, "ready")
	for _, args := range [][]string{{busy, "run_dir=" + runDir}, {busy, "resume=" + runDir}} {
		code, out, errOut := rookscript(t, tmp, nil, args...)
		wantExit(t, "second writer "+args[1], code, 2, out, errOut) // refused by rook.config: a config error
		wantContains(t, "stderr", errOut, fmt.Sprintf("run directory %s is in use by process %d", runDir, holder.cmd.Process.Pid))
	}
	holder.signal(t, syscall.SIGKILL)
	holder.wait()
	p := start(t, tmp, nil, busy, "resume="+runDir)
	p.waitFor(t, "ready") // the run opened: the kernel released the dead holder's lock
}

// 4. A crash (SIGKILL) after steps the last checkpoint does not hold, then a resume: the
// resumed run logs those steps again, and metrics.jsonl holds each step once (the records of
// before the crash are kept in metrics-discarded.jsonl). Resuming the finished run with a
// smaller step count trains nothing, and its evaluation is labelled with the step of the
// weights, not the new step count.
func TestFaultCrashAndResume(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	runDir := filepath.Join(tmp, "run")
	first := start(t, tmp, nil, tinyGRPO(runDir, "steps=10", "save_every=3")...)
	first.waitFor(t, "step 5/10")
	first.signal(t, syscall.SIGKILL)
	first.wait()

	code, out, errOut := rookscript(t, tmp, nil, grpoRecipe, "resume="+runDir)
	wantExit(t, "resume after SIGKILL", code, 0, out, errOut)
	wantContains(t, "stdout", out, "resumed "+runDir+" at step 3", "logged after step-00000003 moved to metrics-discarded.jsonl")
	if got, want := metricsSteps(t, runDir), "0e "+seq(1, 10)+" 10e"; got != want {
		t.Fatalf("metrics.jsonl after crash and resume: %s, want %s", got, want)
	}
	disc, err := os.ReadFile(filepath.Join(runDir, "metrics-discarded.jsonl"))
	if err != nil || !bytes.Contains(disc, []byte(`"step":4,`)) || !bytes.Contains(disc, []byte(`"step":5,`)) {
		t.Fatalf("the records of steps 4 and 5 before the crash are not kept aside: %v\n%s", err, disc)
	}

	code, out, errOut = rookscript(t, tmp, nil, grpoRecipe, "resume="+runDir, "steps=1")
	wantExit(t, "resume a finished run with steps=1", code, 0, out, errOut)
	if got, want := metricsSteps(t, runDir), "0e "+seq(1, 10)+" 10e"; got != want {
		t.Fatalf("metrics.jsonl after re-running a finished run: %s, want %s", got, want)
	}
}

// 3. Resume without overrides continues the recorded run (not the recipe's defaults); an
// override is applied everywhere, said in the log, and recorded by every later checkpoint;
// a key that cannot change mid-run, or another run_dir, is refused by name.
func TestFaultResumeConfig(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	runDir := filepath.Join(tmp, "run")
	code, out, errOut := rookscript(t, tmp, nil, tinyGRPO(runDir, "steps=2", "save_every=2", "beta=0.05", "seed=3")...)
	wantExit(t, "first run", code, 0, out, errOut)

	code, out, errOut = rookscript(t, tmp, nil, grpoRecipe, "resume="+runDir, "steps=3")
	wantExit(t, "resume with steps=3", code, 0, out, errOut)
	wantContains(t, "stdout", out, "changed by the command line:\n  steps: 2 → 3\n", "resumed "+runDir+" at step 2")
	if strings.Contains(out, "model: RANDOM") {
		t.Fatalf("a resume announced the start model's RANDOM weights before loading the checkpoint:\n%s", out)
	}
	cfg := checkpointState(t, runDir, 3)["config"].(map[string]any)
	grpo, rollout := cfg["grpo"].(map[string]any), cfg["rollout"].(map[string]any)
	if grpo["beta"] != 0.05 || cfg["seed"] != 3.0 || cfg["steps"] != 3.0 || rollout["max_new_tokens"] != 8.0 {
		t.Fatalf("checkpoint after resume records config %v, want the recorded beta (given by its bare name) 0.05, seed 3, max_new_tokens 8 and steps 3", cfg)
	}

	code, out, errOut = rookscript(t, tmp, nil, grpoRecipe, "resume="+runDir, "steps=4", "lr=0.5")
	wantExit(t, "resume with lr=0.5", code, 0, out, errOut)
	wantContains(t, "stdout", out, "  adamw.lr: 0.0003 → 0.5\n", "resume: optimizer lr 0.0003 → 0.5")
	st := checkpointState(t, runDir, 4)
	adamw := st["config"].(map[string]any)["adamw"].(map[string]any)
	if opt := st["optimizer"].(map[string]any); opt["lr"] != 0.5 || adamw["lr"] != 0.5 {
		t.Fatalf("lr=0.5 on resume: optimizer %v, config lr %v", opt, adamw["lr"])
	}
	b, _ := os.ReadFile(filepath.Join(runDir, "config.json"))
	if !bytes.Contains(b, []byte(`"lr": 0.5`)) {
		t.Fatalf("config.json does not record the override:\n%s", b)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"model=random:small"}, `model cannot change in the middle of a run (it ran with "random:tiny", the command line gives "random:small")`},
		{[]string{"seed=4"}, "seed cannot change in the middle of a run"},
		{[]string{"max_ply=30"}, "max_ply cannot change in the middle of a run (it ran with 20, the command line gives 30)"},
		{[]string{"run_dir=" + filepath.Join(tmp, "other")}, "names another directory"},
		{[]string{"betta=1"}, `unknown key "betta" (did you mean "beta"?)`},
	} {
		code, out, errOut := rookscript(t, tmp, nil, append([]string{grpoRecipe, "resume=" + runDir}, c.args...)...)
		wantExit(t, strings.Join(c.args, " "), code, 2, out, errOut) // config errors exit 2
		wantContains(t, "stderr", errOut, c.want)
	}
	if _, err := os.Stat(filepath.Join(tmp, "other")); err == nil {
		t.Fatal("run_dir=other resume=run wrote into other")
	}
}

// 5. SIGINT after the first step: the step finishes, a checkpoint is saved, the command that
// resumes is printed and the exit code is 130; that command finishes the run with one record
// per step. SIGTERM is the same with 143.
func TestFaultInterruptThenResume(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(signalName(c.sig), func(t *testing.T) {
			tmp := t.TempDir()
			runDir := filepath.Join(tmp, "run")
			p := start(t, tmp, nil, tinyGRPO(runDir, "steps=6", "save_every=5")...)
			p.waitFor(t, "step 1/6")
			p.signal(t, c.sig)
			code, out, errOut := p.wait()
			wantExit(t, "interrupted run", code, c.code, out, errOut)
			wantContains(t, "stderr", errOut, "finishing the current step, then saving a checkpoint", "interrupted by "+signalName(c.sig)+": saved checkpoint step-")
			line := errOut[strings.Index(errOut, "resume with: "):]
			line = strings.TrimSpace(strings.SplitN(line, "\n", 2)[0])
			cmd := strings.Fields(strings.TrimPrefix(line, "resume with: "))
			if want := []string{rookscriptBinary(t), grpoRecipe, "resume=" + runDir}; !slices.Equal(cmd, want) {
				t.Fatalf("resume command %q, want %q", cmd, want)
			}
			if c.sig != syscall.SIGINT {
				return
			}
			code, out, errOut = rookscript(t, tmp, nil, cmd[1:]...)
			wantExit(t, "the printed resume command", code, 0, out, errOut)
			if got, want := metricsSteps(t, runDir), "0e "+seq(1, 6)+" 6e"; got != want {
				t.Fatalf("metrics.jsonl after interrupt and resume: %s, want %s", got, want)
			}
		})
	}
}

// 5. A second Ctrl-C aborts at once, even while the current step does not end; with no run
// open, the first one does.
func TestFaultSecondInterruptAborts(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	busy := mustAbs("testdata/busy.lua")
	p := start(t, tmp, nil, busy, "run_dir="+filepath.Join(tmp, "busy"))
	p.waitFor(t, "ready")
	p.signal(t, os.Interrupt)
	p.waitFor(t, "send it again to abort at once")
	p.signal(t, os.Interrupt)
	code, out, errOut := p.wait()
	wantExit(t, "second SIGINT", code, 130, out, errOut)
	wantContains(t, "stderr", errOut, "aborted by SIGINT before saving; the newest checkpoint of "+filepath.Join(tmp, "busy")+" is step-00000000",
		"resume with: ")

	p = start(t, tmp, nil, busy, "with_run=false")
	p.waitFor(t, "ready")
	p.signal(t, os.Interrupt)
	code, out, errOut = p.wait()
	wantExit(t, "SIGINT with no run", code, 130, out, errOut)
	wantContains(t, "stderr", errOut, "aborted by SIGINT; no checkpoint to resume from")
}

// 8 and GRPO 4. The recovery policy through the recipe: two non-finite steps roll the run back
// to its checkpoint, and the step counter goes back with the weights (the checkpoint of step 6
// holds 6 optimizer steps, one record per step in metrics.jsonl); a policy that stops exits 3,
// with its evaluation labelled at the step where it stopped; a rollback due before any
// checkpoint stops the run instead of going on.
func TestFaultRecoveryRollbackAndStop(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	runDir := filepath.Join(tmp, "rollback")
	env := []string{"DRILL_RECIPE=" + grpoRecipe, "DRILL_NAN_AT=3,4"}
	code, out, errOut := rookscript(t, tmp, env, append([]string{"--trust", drillRecipe, "run_dir=" + runDir, "steps=6", "save_every=2"}, faultRun...)...)
	wantExit(t, "rollback drill", code, 0, out, errOut)
	wantContains(t, "stdout", out, "rolled back to step-00000002")
	if got, want := metricsSteps(t, runDir), "0e "+seq(1, 6)+" 6e"; got != want {
		t.Fatalf("metrics.jsonl after a rollback: %s, want %s", got, want)
	}
	if st := checkpointState(t, runDir, 6); st["optimizer"].(map[string]any)["steps"] != 6.0 {
		t.Fatalf("checkpoint step-00000006 holds %v optimizer steps: its label is not the step of its weights", st["optimizer"].(map[string]any)["steps"])
	}

	for _, c := range []struct {
		name, nan string
		args      []string
		metrics   string
		report    string
	}{
		{"stop after unhealthy steps", "3,4", []string{"recovery.rollback_after=0", "recovery.stop_after=2"}, "0e 1 2 3 4 4e", "stopped at step 4 after 2 unhealthy steps"},
		{"rollback without a checkpoint", "1,2", nil, "0e 1 2 2e", "a rollback was due but failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			runDir := filepath.Join(tmp, strings.ReplaceAll(c.name, " ", "-"))
			env := []string{"DRILL_RECIPE=" + grpoRecipe, "DRILL_NAN_AT=" + c.nan}
			args := append(append([]string{"--trust", drillRecipe, "run_dir=" + runDir, "steps=6", "save_every=5"}, faultRun...), c.args...)
			code, out, errOut := rookscript(t, tmp, env, args...)
			wantExit(t, c.name, code, 3, out, errOut)
			wantContains(t, "stderr", errOut, "was stopped by its recovery policy")
			report, _ := os.ReadFile(filepath.Join(runDir, "report.txt"))
			wantContains(t, "report.txt", string(report), c.report)
			if c.nan == "1,2" {
				wantContains(t, "report.txt", string(report), "run:rollback: no checkpoint saved yet in "+runDir)
			}
			if got := metricsSteps(t, runDir); got != c.metrics {
				t.Fatalf("metrics.jsonl: %s, want %s", got, c.metrics)
			}
		})
	}
}

// 10. sft.lua without out= saves its model in its run directory (runs/sft/model), where
// neither exists yet, and its rows are built into the cache (rook.chess.dataset with no
// path, which a confined recipe may use), never beside the run.
func TestFaultSFTDefaultOut(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	cache := filepath.Join(tmp, "cache")
	code, out, errOut := rookscript(t, tmp, []string{"ROOKSCRIPT_CACHE=" + cache}, "--quiet", sftRecipe, "model=random:tiny", "rows=16", "stockfish.depth=4", "steps=2", "batch=4")
	wantExit(t, "sft.lua with the default out", code, 0, out, errOut)
	if _, err := os.Stat(filepath.Join(tmp, "runs", "sft", "model", "model.safetensors")); err != nil {
		t.Fatalf("sft.lua did not save runs/sft/model: %v", err)
	}
	rows, _ := filepath.Glob(filepath.Join(cache, "datasets", "*.txt"))
	if len(rows) != 1 {
		t.Fatalf("generated rows in the cache: %v", rows)
	}
	if entries, _ := os.ReadDir(filepath.Join(tmp, "runs")); len(entries) != 1 {
		t.Fatalf("runs/ holds %v, want only the run directory", entries)
	}
	// Rows changed after their build are refused, never trained on.
	f, err := os.OpenFile(rows[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("P: planted\n")
	f.Close()
	code, out, errOut = rookscript(t, tmp, []string{"ROOKSCRIPT_CACHE=" + cache}, "--quiet", sftRecipe, "model=random:tiny", "rows=16",
		"stockfish.depth=4", "steps=2", "batch=4", "run_dir=runs/sft2")
	wantExit(t, "sft.lua on changed rows", code, 1, out, errOut)
	wantContains(t, "stderr", errOut, "is not the file its build wrote")
}
