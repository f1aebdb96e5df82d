package luabind

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/checkpoint"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/optim"
)

// recordedRun makes a run directory whose checkpoint recorded cfg, from a small model saved
// beside it.
func recordedRun(t *testing.T, cfg map[string]any) string {
	t.Helper()
	tmp := t.TempDir()
	mc := gpt2.Config{VocabSize: 29, MaxSeqLen: 16, NumLayers: 1, NumHeads: 2, Channels: 8, LayerNormE: 1e-5}
	src := filepath.Join(tmp, "model")
	params := gpt2.RandomParams(mc, 1)
	if err := gpt2.SaveHF(src, mc, params); err != nil {
		t.Fatal(err)
	}
	id, _, _, err := checkpoint.NewReference(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "run")
	r, err := checkpoint.Create(dir, checkpoint.Options{KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.WriteConfig(cfg); err != nil {
		t.Fatal(err)
	}
	zeros := make([]float32, len(params))
	st := &checkpoint.State{Step: 4, Model: mc, Params: params, Reference: id,
		Optimizer: checkpoint.OptimizerState{Config: optim.DefaultAdamW(), M: zeros, V: zeros}}
	if _, err := r.Save(st); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestResumeConfig: on resume the recorded config is the base — not the defaults, not the
// TOML beside the recipe — the command line (config=PATH, key=value) changes it and says
// what changed, and what cannot be resumed is refused by name.
func TestResumeConfig(t *testing.T) {
	recorded := map[string]any{"model": "m1", "seed": 7.0, "lr": 0.01, "kl_coef": 0.3, "steps": 4.0,
		"run_dir": "runs/old-name", "resume": "", "opt": map[string]any{"betas": []any{0.8, 0.9}}, "pass": map[string]any{"x": 1.0}}
	dir := recordedRun(t, recorded)
	tmp := t.TempDir()
	recipe := filepath.Join(tmp, "train.lua")
	os.WriteFile(recipe, []byte(`
		local rook = require("rook")
		local cfg = rook.config{ model = "m0", seed = 1, lr = 1e-4, kl_coef = 0.02, steps = 10, run_dir = "runs/x",
		                         opt = { betas = { 0.9, 0.95 } }, pass = {}, new_key = "d" }
		print(string.format("%s %g %g %g %g %s %g %s %s %s", cfg.model, cfg.seed, cfg.lr, cfg.kl_coef, cfg.steps,
		                    cfg.run_dir, cfg.opt.betas[1], tostring(cfg.pass.x), cfg.new_key, cfg.resume))
	`), 0o644)
	os.WriteFile(filepath.Join(tmp, "train.toml"), []byte("kl_coef = 0.5\n"), 0o644) // read at the start only
	other := filepath.Join(tmp, "other.toml")
	os.WriteFile(other, []byte("lr = 0.2\n"), 0o644)

	cases := []struct {
		name string
		args []string
		want []string // output lines, or an error substring
	}{
		{"the record is the base", []string{"resume=" + dir},
			[]string{"the config recorded by step-00000004, unchanged",
				"note: new_key is not in the run's record (a key the recipe gained since): the recipe's default \"d\"",
				"note: run_dir runs/old-name → " + dir + " (the directory resumed)",
				"m1 7 0.01 0.3 4 " + dir + " 0.8 1 d " + dir}},
		{"overrides change it and are listed", []string{"resume=" + dir, "steps=6", "opt.betas=[0.7, 0.9]", "config=" + other},
			[]string{"changed by the command line:", "  lr: 0.01 → 0.2", "  opt.betas: [0.8,0.9] → [0.7,0.9]", "  steps: 4 → 6",
				"m1 7 0.2 0.3 6 " + dir + " 0.7 1 d " + dir}},
		{"an override equal to the record is no change", []string{"resume=" + dir, "kl_coef=0.3", "run_dir=" + dir}, []string{"unchanged"}},
		{"model is fixed", []string{"resume=" + dir, "model=m2"}, []string{`resume=` + dir + `: model cannot change in the middle of a run (it ran with "m1", the command line gives "m2")`}},
		{"seed is fixed", []string{"resume=" + dir, "seed=8"}, []string{"seed cannot change in the middle of a run"}},
		{"another run_dir", []string{"resume=" + dir, "run_dir=runs/else"}, []string{"run_dir=runs/else names another directory"}},
		{"a misspelt override", []string{"resume=" + dir, "kl_coeff=1"}, []string{`command line: unknown key "kl_coeff" (did you mean "kl_coef"?)`}},
		{"no checkpoint", []string{"resume=" + tmp}, []string{"is not a run directory"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := runLua(t, Options{Args: c.args, Recipe: recipe}, "", "")
			if err != nil {
				got += err.Error()
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Fatalf("output lacks %q:\n%s", w, got)
				}
			}
		})
	}

	// A recorded key the recipe no longer declares is refused by name, never dropped.
	renamed := recordedRun(t, map[string]any{"model": "m1", "seed": 7.0, "kl_coef": 0.3, "beta_warmup": 3.0})
	_, err := runLua(t, Options{Args: []string{"resume=" + renamed}, Recipe: recipe}, "", "")
	if err == nil || !strings.Contains(err.Error(), `checkpoint step-00000004 recorded key "beta_warmup", which this recipe does not declare`) {
		t.Fatalf("a recorded key the recipe lost: %v", err)
	}
	// Several such keys: the run is another recipe's, and the refusal says so, suggesting no key.
	foreign := recordedRun(t, map[string]any{"model": "m1", "seed": 7.0, "eval_every": 0.0, "kl_warmup": 10.0, "max_ply": 20.0})
	_, err = runLua(t, Options{Args: []string{"resume=" + foreign}, Recipe: recipe}, "", "")
	var fe *ConfigError
	if !errors.As(err, &fe) || fe.Source != "resume="+foreign || fe.Reason != "checkpoint step-00000004 recorded keys this recipe does not declare (eval_every, kl_warmup, max_ply): the run was started by another recipe (its copy is "+filepath.Join(foreign, "recipe.lua")+")" {
		t.Fatalf("a run of another recipe: %v", err)
	}
}

// TestResumeSections: a run records every setting of its sections; on resume they are the
// base, an override of one is listed by its section's name, and a record from before sections
// (engine settings at the top of a flat config) is refused with what to do.
func TestResumeSections(t *testing.T) {
	tmp := t.TempDir()
	recipe := filepath.Join(tmp, "train.lua")
	os.WriteFile(recipe, []byte(`
		local rook = require("rook")
		local cfg = rook.config{ model = "m0", seed = 1, grpo = { beta = 0.02 }, rollout = { group = 4 } }
		print(string.format("beta %g epsilon %g group %d loss %s", cfg.grpo.beta, cfg.grpo.epsilon, cfg.rollout.group, cfg.grpo.loss_type))
	`), 0o644)
	// What a run records: the sections' every setting (here with values the recipe does not give).
	env, err := New(Options{Quiet: true, Stdout: io.Discard, Args: []string{"epsilon=0.3", "loss_type=dapo"}, Recipe: recipe})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.RunFile(t.Context(), recipe); err != nil {
		t.Fatal(err)
	}
	rec := env.config
	env.Close()
	if g := rec["grpo"].(map[string]any); g["epsilon"] != 0.3 || g["loss_type"] != "dapo" || g["kl_estimator"] != "k3" {
		t.Fatalf("recorded grpo section %v: want every setting, the overrides included", g)
	}
	rec["model"], rec["seed"] = "m1", 7.0
	dir := recordedRun(t, rec)
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"the record is the base", []string{"resume=" + dir}, []string{"unchanged", "beta 0.02 epsilon 0.3 group 4 loss dapo"}},
		{"an override, by its bare name", []string{"resume=" + dir, "beta=0.1", "rollout.group=8"},
			[]string{"  grpo.beta: 0.02 → 0.1", "  rollout.group: 4 → 8", "beta 0.1 epsilon 0.3 group 8 loss dapo"}},
	} {
		got, err := runLua(t, Options{Args: c.args, Recipe: recipe}, "", "")
		if err != nil {
			got += err.Error()
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Fatalf("%s: output lacks %q:\n%s", c.name, w, got)
			}
		}
	}
	// A record whose keys the recipe does not declare (settings at the top, as before sections)
	// is refused, never dropped.
	flat := recordedRun(t, map[string]any{"model": "m1", "seed": 7.0, "kl_coef": 0.3, "group": 4.0})
	_, err = runLua(t, Options{Args: []string{"resume=" + flat}, Recipe: recipe}, "", "")
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Source != "resume="+flat {
		t.Fatalf("a flat record: %v", err)
	}
}

// TestResumeOptimizer: the optimizer's settings on resume come from the checkpoint, except
// those the recipe now builds differently from how the run built them; the learning rate
// keeps the factor the run applied to it (a recovery policy halving it).
func TestResumeOptimizer(t *testing.T) {
	base := optim.AdamWConfig{LR: 1e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}
	halved := base
	halved.LR = 5e-5
	for _, c := range []struct {
		name               string
		built, base, saved optim.AdamWConfig
		want               optim.AdamWConfig
		changes            int
	}{
		{"as built: the checkpoint's, recovery's lr included", base, base, halved, halved, 0},
		{"lr changed: the new lr times recovery's factor", optim.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, base, halved,
			optim.AdamWConfig{LR: 5e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}, 1},
		{"weight decay changed", optim.AdamWConfig{LR: 1e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}, base, base,
			optim.AdamWConfig{LR: 1e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}, 1},
		{"no recorded base: the saved settings are the base", base, optim.AdamWConfig{}, base, base, 0},
	} {
		got, changes := resumeOptimizer(c.built, c.base, c.saved)
		if got != c.want || len(changes) != c.changes {
			b, _ := json.Marshal(changes)
			t.Errorf("%s: %+v %s, want %+v with %d changes", c.name, got, b, c.want, c.changes)
		}
	}
}

// A recipe's rule "fixed" makes a key unchangeable on resume: rook.config refuses the change
// before anything is loaded, and the resume's listing of changes is never printed for it.
// Unchanged or changing another key, the resume goes on.
func TestResumeFixedRule(t *testing.T) {
	dir := recordedRun(t, map[string]any{"model": "m1", "seed": 7.0, "data": "a.txt", "steps": 4.0})
	recipe := filepath.Join(t.TempDir(), "fixed.lua")
	os.WriteFile(recipe, []byte(`local rook = require("rook")
		local cfg = rook.config({ model = "m0", seed = 1, data = "a.txt", steps = 4 }, { data = "fixed", steps = "integer >= 1" })
		print("data " .. cfg.data .. ", steps " .. cfg.steps)`), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"data=b.txt"}, "resume=" + dir + `: data cannot change in the middle of a run (it ran with "a.txt", the command line gives "b.txt")`},
		{[]string{"steps=6"}, "data a.txt, steps 6"},
		{nil, "data a.txt, steps 4"},
	} {
		out, err := runLua(t, Options{Args: append([]string{"resume=" + dir}, c.args...), Recipe: recipe}, "", "")
		if err != nil {
			out += err.Error()
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%v: output lacks %q:\n%s", c.args, c.want, out)
		}
		if err != nil && strings.Contains(out, "changed by the command line") {
			t.Errorf("%v: a refused change was listed first:\n%s", c.args, out)
		}
	}
	// A section's setting takes only "fixed".
	_, err := runLua(t, Options{}, "r.lua", `require("rook").config({ stockfish = { depth = 8 } }, { ["stockfish.depth"] = "integer >= 1" })`)
	var re *ConfigError
	if !errors.As(err, &re) || re.Key != "stockfish.depth" || re.Reason != `a section's setting is checked by its own call; the only rule for it is "fixed"` {
		t.Errorf("a rule other than fixed on a section's setting: %v", err)
	}
}

// settingsRecipe trains with plain option tables, as a recipe may: every setting it does not
// name comes from the defaults. Its β grows each step (a KL warm-up). It resumes the run the
// command line names (resume=DIR), or the one its own key from names (rook.run's resume,
// after the optimizer was built).
const settingsRecipe = `
local rook = require("rook")
local cfg = rook.config{ run_dir = "", from = "", steps = 4, save_at = 0 }
local policy = rook.load("random:tiny")
local opt = rook.adamw(policy, { lr = 3e-3 })
local resume = cfg.resume or (cfg.from ~= "" and cfg.from or nil)
local run = assert(rook.run{ dir = cfg.run_dir ~= "" and cfg.run_dir or nil, resume = resume, policy = policy, opt = opt, steps = cfg.steps })
for step = run.step + 1, cfg.steps do
  local b = policy:rollout({ "a", "b" }, { group = 4, max_new_tokens = 6, seed = 100 + step })
  rook.reward.fn(b, function(_, text) return #text % 5 end)
  rook.grpo.step(policy, run.ref, opt, b, { beta = 0.01 * step })
  run:log(step, {})
  if step == cfg.save_at then run:save(step) end
end
run:close()
print("hash " .. policy:hash())
`

// settingsRunner writes settingsRecipe into a temporary directory and returns the directory
// and a function that runs the recipe with command-line args, failing the test on an error.
func settingsRunner(t *testing.T) (string, func(args ...string) string) {
	t.Helper()
	tmp := t.TempDir()
	recipe := filepath.Join(tmp, "train.lua")
	if err := os.WriteFile(recipe, []byte(settingsRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	return tmp, func(args ...string) string {
		t.Helper()
		out, err := runLua(t, Options{Args: args, Recipe: recipe, Trust: true}, "", "")
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
}

// TestGRPOStepChecksReferenceWeights (DESIGN §6.6): besides the reference's label, the GRPO
// trainer checks its weights against the run's recorded hash, after every write it counts.
func TestGRPOStepChecksReferenceWeights(t *testing.T) {
	e, err := New(Options{Quiet: true, Trust: true, Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.DoString(t.Context(), `
		local rook = require("rook")
		policy = rook.load("random:tiny")
		opt = rook.adamw(policy)
		run = assert(rook.run{ dir = "`+filepath.Join(t.TempDir(), "run")+`", policy = policy, opt = opt })
		ref = run.ref
		function step()
			local b = policy:rollout({ "a" }, { group = 4, max_new_tokens = 4, seed = 1 })
			b:set_rewards({ 1, 0, 0, 1 })
			rook.grpo.step(policy, ref, opt, b, { beta = 0.1 })
		end
		step()`, "ref.lua"); err != nil {
		t.Fatal(err)
	}
	ref := e.L.GetGlobal("ref").(*lua.LUserData).Value.(*model)
	if err := ref.m.SetParams(gpt2.RandomParams(ref.m.Config, 9)); err != nil { // behind the binding's back
		t.Fatal(err)
	}
	err = e.DoString(t.Context(), "step()", "ref.lua")
	if err == nil || !strings.Contains(err.Error(), "the recorded reference's is "+ref.hash+": they changed without a recorded sync") {
		t.Fatalf("a reference whose weights changed: %v", err)
	}
}

// TestResumeSaysOtherKernels: a checkpoint records what decided its bits (the backend's
// Describe: on the CPU, OpenBLAS's kernel family); a resume on other kernels goes on and says
// that the run is no longer bit for bit the one that would have continued there, and a resume
// on the same kernels says nothing of it.
func TestResumeSaysOtherKernels(t *testing.T) {
	tmp, run := settingsRunner(t)
	same, other := filepath.Join(tmp, "same"), filepath.Join(tmp, "other")
	run("run_dir="+same, "steps=2", "save_at=2")
	run("run_dir="+other, "steps=2", "save_at=2")
	here := kernels(cpu.New(1))
	r, err := checkpoint.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	st, err := r.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if st.Kernels != here {
		t.Fatalf("the checkpoint records kernels %q, this process runs %q", st.Kernels, here)
	}
	st.Kernels = "cpu, OpenBLAS Prescott kernels"
	if _, err := r.Save(st); err != nil {
		t.Fatal(err)
	}
	r.Close()

	want := "resume: step-00000002 was written on cpu, OpenBLAS Prescott kernels, and this process runs " + here +
		": the run goes on, but not bit for bit as it would have there"
	if out := run("resume="+other, "steps=3"); !strings.Contains(out, want) {
		t.Errorf("a resume on other kernels does not say %q:\n%s", want, out)
	}
	if out := run("resume="+same, "steps=3"); strings.Contains(out, "bit for bit") {
		t.Errorf("a resume on the same kernels says:\n%s", out)
	}
}
