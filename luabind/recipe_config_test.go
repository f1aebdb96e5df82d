package luabind_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/checkpoint"
	"github.com/rookscript/rookscript/luabind"
)

// TestRecipeConfigRejectedBeforeWork runs the real recipes/grpo_stable.lua with one bad
// config value at a time. Each is refused with an error that names its key and carries no
// Lua traceback, before Stockfish starts (the error's line is above the recipe's
// rook.stockfish call), before any model loads and before the run directory exists. Only
// max_new_tokens needs the model to be known: rook.grpo.plan refuses it right after the load,
// still before the run directory. No value is silently replaced (depth 0, keep 0), and an old
// name is refused with the new one.
func TestRecipeConfigRejectedBeforeWork(t *testing.T) {
	const recipe = "../recipes/grpo_stable.lua"
	src, err := os.ReadFile(recipe)
	if err != nil {
		t.Fatal(err)
	}
	lineOf := func(s string) int {
		i := strings.Index(string(src), s)
		if i < 0 {
			t.Fatalf("%s has no %q", recipe, s)
		}
		return strings.Count(string(src[:i]), "\n") + 1
	}
	stockfishLine, loadLine := lineOf("rook.stockfish("), lineOf("rook.load(")
	errLine := regexp.MustCompile(`grpo_stable\.lua:(\d+):`)

	for _, c := range []struct {
		arg, want string
		afterLoad bool
	}{
		{"group=1", "rollout.group: grpo: groups of 1 completions: GRPO needs at least 2 per prompt to compare", false},
		{"prompts=0", "prompts must be an integer ≥ 1, got 0", false},
		{"steps=2.5", "steps must be an integer ≥ 1, got 2.5", false},
		{"env_fraction=1.5", "env_fraction must be a finite number in [0, 1], got 1.5", false},
		{"stockfish.depth=0", "stockfish: depth must be ≥ 1, got 0", false},
		{"depth=4", `depth: a setting of several sections: write reward.depth or stockfish.depth`, false},
		{"stockfish.workers=0", "stockfish: workers must be ≥ 1, got 0", false},
		{"malformed=20", "reward: malformed must be in [-10, 10], got 20", false},
		{"reward.malformed=nan", `command line: reward.malformed: want a finite number, got "nan"`, false},
		{"soft_punish_cache=100000", "reward.soft_overlong.soft_punish_cache must be ≤ rollout.max_new_tokens (", false},
		{"penalty_factor=-1", "reward: soft_overlong.penalty_factor must be a finite number ≥ 0, got -1", false},
		{"micro_batch=-1", "grpo: micro_batch must be ≥ 0, got -1", false},
		{"save_every=0", "save_every must be an integer ≥ 1, got 0", false},
		{"max_draws=0", "max_draws must be an integer ≥ 1, got 0", false},
		{"on_short=stop", `on_short must be one of proceed, error, got "stop"`, false},
		{"dynamic_sampling=3", "dynamic_sampling: want a boolean like the recipe's default, got a number", false},
		{"keep=0", "keep must be an integer ≥ 1, got 0", false},
		{"kl_schedule=sigmoid", "kl_schedule must be one of constant, linear, step", false},
		{"beta=inf", `command line: beta: want a finite number, got "inf"`, false},
		{"lr=nan", `command line: lr: want a finite number, got "nan"`, false},
		{"beta=-0.1", "grpo: beta must be a finite number ≥ 0, got -0.1", false},
		{"grpo.beta=-0.1", "grpo: beta must be a finite number ≥ 0, got -0.1", false},
		{"lr=-1", "adamw: lr must be a finite number ≥ 0, got -1", false},
		{"lr_schedule=cosinee", `adamw: lr_schedule "cosinee" is not one of`, false},
		{"lr_warmup=-1", "lr_warmup must be ≥ 0", false},
		{"loss_type=mean", `loss_type "mean" is not one of`, false},
		{"epsilon=1.5", "epsilon must be < 1", false},
		{"num_iterations=0", "num_iterations must be ≥ 1", false},
		{"temperature=0", "rollout: temperature must be > 0", false},
		{"top_p=2", "top_p must be in [0, 1]", false},
		{"top_k=-1", "top_k must be ≥ 0", false},
		{"rollout.max_new_tokens=256", "rook.grpo.plan: grpo: answers of up to 256 tokens leave no room for a prompt in the model's context of 256", true},
	} {
		t.Run(c.arg, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			var out strings.Builder
			e, err := luabind.New(luabind.Options{Args: []string{c.arg, "model=random:tiny", "run_dir=" + dir},
				Recipe: recipe, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			err = e.RunFile(context.Background(), recipe)
			if err == nil {
				t.Fatal("the recipe ran")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) {
				t.Errorf("error %q does not say %q", msg, c.want)
			}
			if strings.Contains(msg, "stack traceback") {
				t.Errorf("a config error with a Lua traceback:\n%s", msg)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the run directory was created")
			}
			m := errLine.FindStringSubmatch(msg)
			if m == nil {
				t.Fatalf("error %q names no recipe line", msg)
			}
			line, _ := strconv.Atoi(m[1])
			loaded := strings.Contains(out.String(), "model: ")
			switch {
			case !c.afterLoad && (line >= stockfishLine || loaded):
				t.Errorf("refused at line %d (Stockfish starts at line %d), model loaded: %v", line, stockfishLine, loaded)
			case c.afterLoad && (line <= loadLine || !loaded):
				t.Errorf("refused at line %d, want just after the model loads (line %d)", line, loadLine)
			}
		})
	}
}

// TestRecipeRefusesRunDirBeforeWork: grpo_stable.lua refuses a run directory that rook.run would
// refuse (one holding checkpoints, one another writer holds) before it starts Stockfish or
// loads (or builds) the model.
func TestRecipeRefusesRunDirBeforeWork(t *testing.T) {
	const recipe = "../recipes/grpo_stable.lua"
	withCk := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(filepath.Join(withCk, "checkpoints", "step-00000010"), 0o755); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(t.TempDir(), "held")
	holder, err := checkpoint.Create(held, checkpoint.Options{KeepLast: checkpoint.DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	for _, c := range []struct{ name, dir, want string }{
		{"checkpoints", withCk, "run_dir: " + withCk + " already holds checkpoints (step-00000010)"},
		{"another writer", held, "run_dir: run directory " + held + " is in use by"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			e, err := luabind.New(luabind.Options{Args: []string{"model=random:tiny", "run_dir=" + c.dir}, Recipe: recipe, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			err = e.RunFile(context.Background(), recipe)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			if strings.Contains(out.String(), "model: ") {
				t.Error("the model was loaded before the refusal")
			}
		})
	}
}
