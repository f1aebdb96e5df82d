package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The recipes users run, end to end on a tiny random model with a real Stockfish: small
// enough for CI, real enough that every call a recipe makes runs.

// TestMain lets the test binary stand in for rookscript in a child process (the REPL reads
// os.Stdin).
func TestMain(m *testing.M) {
	if os.Getenv("ROOKSCRIPT_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	// Recipes build their data in the cache: a test's goes away with the test, never into
	// the user's (child processes inherit it).
	cache, err := os.MkdirTemp("", "rookscript-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("ROOKSCRIPT_CACHE", cache)
	code := m.Run()
	removeBinary()
	os.RemoveAll(cache)
	os.Exit(code)
}

func runRecipe(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(args, &out, &errOut); code != 0 {
		t.Fatalf("rookscript %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out.String(), errOut.String())
	}
	return out.String()
}

var tinyRun = []string{"model=random:tiny", "prompts=2", "group=4", "max_new_tokens=12", "eval_size=6",
	"stockfish.depth=4", "micro_batch=8"}

func TestGRPOStableRecipe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	out := runRecipe(t, append([]string{"--quiet", "../../recipes/grpo_stable.lua", "steps=5", "save_every=2", "run_dir=" + dir}, tinyRun...)...)
	if !strings.Contains(out, "p_format") || !strings.Contains(out, "reward_mean") {
		t.Fatalf("no before/after table:\n%s", out)
	}
	if !strings.Contains(out, "evaluation on 6 fixed prompts") || !strings.Contains(out, "changed beyond noise: up {") {
		t.Errorf("the table lacks its intervals and verdict:\n%s", out)
	}
	for _, f := range []string{"recipe.lua", "config.json", "metrics.jsonl", "checkpoints/LATEST", "checkpoints/step-00000005/state.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("run directory lacks %s", f)
		}
	}
	var cfg map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if err := json.Unmarshal(b, &cfg); err != nil || cfg["steps"] != 5.0 || cfg["model"] != "random:tiny" {
		t.Errorf("config.json does not hold the resolved config: %v %v", cfg, err)
	}
	// Resume continues from the last checkpoint to the new step count.
	out = runRecipe(t, append([]string{"../../recipes/grpo_stable.lua", "steps=7", "save_every=2", "resume=" + dir}, tinyRun...)...)
	if !strings.Contains(out, "resumed "+dir+" at step 5") || !strings.Contains(out, "step 7/7") {
		t.Fatalf("resume did not continue from step 5:\n%s", out)
	}
}

func TestOtherRecipes(t *testing.T) {
	tmp := t.TempDir()
	var diag, diagErr bytes.Buffer
	// A random model fails "model is trained": diagnose exits 1, naming the failed checks.
	if code := run([]string{"--quiet", "../../recipes/diagnose.lua", "model=random:tiny", "prompts=2", "group=4",
		"max_new_tokens=12", "overfit_steps=2", "stockfish.depth=4"}, &diag, &diagErr); code != 1 ||
		!strings.Contains(diagErr.String(), "check(s) failed: model is trained, not random") {
		t.Errorf("diagnose on a random model: exit %d, stderr %q; want 1 naming the failed checks", code, diagErr.String())
	}
	out := diag.String()
	for _, check := range []string{"FAIL  model is trained, not random", "PASS  sampler logprobs = training forward, bit for bit",
		"PASS  ratio = 1 exactly before the first update", "PASS  KL = 0 exactly to the initial policy",
		"SKIP  every layer receives a gradient              no reward signal",
		"SKIP  overfitting one batch raises the reward      no reward signal"} {
		if !strings.Contains(out, check) {
			t.Errorf("diagnose output lacks %q:\n%s", check, out)
		}
	}
	runRecipe(t, "--quiet", "../../recipes/eval.lua", "model=random:tiny", "size=4", "max_new_tokens=8", "stockfish.depth=4")
	runRecipe(t, "--quiet", "../../recipes/sft.lua", "model=random:tiny", "rows=24", "stockfish.depth=4", "steps=3", "batch=4",
		"run_dir="+filepath.Join(tmp, "sft"), "out="+filepath.Join(tmp, "sft-model"))
	if _, err := os.Stat(filepath.Join(tmp, "sft-model", "model.safetensors")); err != nil {
		t.Error("sft.lua saved no model")
	}
	ablate := []string{"--quiet", "../../recipes/ablate.lua", "steps=1", "base_dir=" + filepath.Join(tmp, "ablate"),
		"grid.beta=[0.0, 0.05]", "grid.lr=[1e-4]"}
	for _, kv := range tinyRun {
		ablate = append(ablate, "pass."+kv)
	}
	out = runRecipe(t, ablate...)
	if !strings.Contains(out, "beta=0.05,lr=0.0001") { // the grid's keys reach the sub-recipe's sections by name
		t.Errorf("ablation table lacks a setting:\n%s", out)
	}
}

func TestExitCodes(t *testing.T) {
	tmp := t.TempDir()
	bad := filepath.Join(tmp, "bad.lua")
	os.WriteFile(bad, []byte("local x = nil\nx.y = 1\n"), 0o644)
	var out, errOut bytes.Buffer
	if code := run([]string{bad}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "bad.lua:2") ||
		!strings.Contains(errOut.String(), "stack traceback") {
		t.Errorf("recipe error: exit %d, stderr %q", code, errOut.String())
	}
	for _, args := range [][]string{{"notarecipe"}, {bad, "novalue"}, {"--nope"}, {filepath.Join(tmp, "missing.lua")}} {
		if code := run(args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)", args, code)
		}
	}
	if code := run([]string{"version"}, &out, &errOut); code != 0 {
		t.Errorf("version: exit %d", code)
	}
}

// TestREPLSession is the session the REPL exists for, as scripted input: load a model,
// generate from a FEN, score the result, run one GRPO step and inspect its metrics.
func TestREPLSession(t *testing.T) {
	session := strings.Join([]string{
		`policy = rook.load("random:tiny")`,
		`prompt = rook.chess.policy_prompt("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1")`,
		`text = policy:generate(prompt, { max_new_tokens = 10, seed = 1 })`,
		`env = "A: rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1+e2e4+e2e4+"`,
		`rook.chess.score(env, rook.chess.step("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "e2e4").completion).total`,
		`opt = rook.adamw(policy, { lr = 1e-3 })`,
		`b = policy:rollout({ prompt }, { group = 4, max_new_tokens = 6, seed = 2 })`,
		`b:set_rewards({ 1, 0, 0.5, 0 })`,
		`m = rook.grpo.step(policy, policy:reference(), opt, b, { beta = 0.01 })`,
		`m.finite, m.updates, m["ratio/first_max_abs_log"] == 0`,
	}, "\n") + "\n"
	cmd := exec.Command(os.Args[0], "--quiet")
	cmd.Env = append(os.Environ(), "ROOKSCRIPT_MAIN=1", "ROOKSCRIPT_HISTORY=")
	cmd.Stdin = strings.NewReader(session)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("REPL: %v\n%s", err, out)
	}
	for _, want := range []string{"rook> 1\n", "true\t1\ttrue"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("REPL output lacks %q:\n%s", want, out)
		}
	}
}
