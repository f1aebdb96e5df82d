package luabind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigSources: defaults < TOML beside the recipe (or config=PATH) < key=value, with
// every wrong key or type an error naming the key and its source.
func TestConfigSources(t *testing.T) {
	dir := t.TempDir()
	recipe := filepath.Join(dir, "train.lua")
	os.WriteFile(recipe, []byte(`
		local rook = require("rook")
		local cfg = rook.config{ steps = 200, lr = 1e-5, name = "base", opt = { betas = { 0.9, 0.95 } }, flag = false, pass = {} }
		if cfg.pass.model then print(cfg.pass.model, cfg.pass.size, #cfg.pass.xs) return end
		print(cfg.steps, cfg.lr, cfg.name, cfg.opt.betas[2], cfg.flag, cfg.resume or "-")
	`), 0o644)
	other := filepath.Join(dir, "other.toml")
	os.WriteFile(other, []byte("steps = 7\n"), 0o644)
	cases := []struct {
		name, toml string
		args       []string
		want       string // the output; or, for an error, the key it names and the source the key came from
		key, from  string
	}{
		{"defaults", "", nil, "200\t1e-05\tbase\t0.95\tfalse\t-", "", ""},
		{"toml beside the recipe", "steps = 50\nname = \"t\"\n[opt]\nbetas = [0.8, 0.9]\n", nil, "50\t1e-05\tt\t0.9\tfalse\t-", "", ""},
		{"override beats toml", "steps = 50\n", []string{"steps=60", "flag=true"}, "60\t1e-05\tbase\t0.95\ttrue\t-", "", ""},
		{"config= names another file", "steps = 50\n", []string{"config=" + other}, "7\t1e-05\tbase\t0.95\tfalse\t-", "", ""},
		{"open table takes any key", "", []string{"pass.model=random:tiny", "pass.size=8", "pass.xs=[1, 2]"}, "random:tiny\t8\t2", "", ""},
		{"resume needs a run to resume", "", []string{"resume=runs/x"}, "", "", "resume=runs/x"},
		{"unknown toml key", "stpes = 5\n", nil, "", "stpes", "config file " + filepath.Join(dir, "train.toml")},
		{"toml type mismatch", "name = 5\n", nil, "", "name", "config file " + filepath.Join(dir, "train.toml")},
		{"nested unknown", "[opt]\nbeta = 1\n", nil, "", "opt.beta", "config file " + filepath.Join(dir, "train.toml")},
		{"list element type", "", []string{`opt.betas=["a", "b"]`}, "", "opt.betas", "command line"},
		{"bad boolean", "", []string{"flag=yes"}, "", "flag", "command line"},
		{"missing config file", "", []string{"config=" + filepath.Join(dir, "nope.toml")}, "", "", "config file " + filepath.Join(dir, "nope.toml")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			toml := filepath.Join(dir, "train.toml")
			os.Remove(toml)
			if c.toml != "" {
				os.WriteFile(toml, []byte(c.toml), 0o644)
			}
			out, err := runLua(t, Options{Args: c.args, Recipe: recipe}, "", "")
			checkConfigOutcome(t, strings.TrimSpace(out), err, c.want, c.key, c.from)
		})
	}
}

// checkConfigOutcome checks a config's output (want), or its *ConfigError: the key it names
// and where the key's value came from.
func checkConfigOutcome(t *testing.T, out string, err error, want, key, from string) {
	t.Helper()
	var ce *ConfigError
	switch {
	case want != "" && err != nil:
		t.Fatalf("error %v, want the output %q", err, want)
	case want != "" && out != want:
		t.Fatalf("output %q, want %q", out, want)
	case want == "" && !errors.As(err, &ce):
		t.Fatalf("error %v (%T), want a *ConfigError", err, err)
	case want == "" && (ce.Key != key || ce.Source != from):
		t.Fatalf("config error %q names key %q from %q, want %q from %q", err, ce.Key, ce.Source, key, from)
	case want == "" && strings.Contains(err.Error(), "traceback"):
		t.Errorf("config error with a traceback: %s", err)
	}
}

func TestOverrideSyntax(t *testing.T) {
	for _, bad := range [][]string{{"steps"}, {"=1"}, {"a..b=1"}, {"x=1", "x=2"}} {
		if _, err := New(Options{Args: bad}); err == nil {
			t.Errorf("%v: no error", bad)
		} else if _, ok := err.(UsageError); !ok {
			t.Errorf("%v: %T is not a UsageError", bad, err)
		}
	}
}

// TestConfigSectionsAndRules: a section's setting may be given under its name or TRL's alias,
// bare or with its section, on the command line or in TOML (a [section] table or a bare key),
// but only once; no source may give a non-finite number; the recipe's declared rules are
// checked on the resolved values; every such error names its key and has no Lua traceback.
func TestConfigSectionsAndRules(t *testing.T) {
	dir := t.TempDir()
	recipe := filepath.Join(dir, "train.lua")
	os.WriteFile(recipe, []byte(`
		local rook = require("rook")
		local cfg = rook.config({ steps = 10, grid = { loss_type = { "grpo" } }, frac = 0.5, mode = "a", even = 2,
		                          grpo = { beta = 0.02 } },
		                        { steps = "integer >= 1", frac = "[0, 1]", mode = "one of a, b",
		                          even = function(v) return v % 2 == 0, "must be even" end })
		print(cfg.grpo.beta, cfg.grpo.epsilon, cfg.steps, cfg.grid.loss_type[2] or "-", cfg.grpo.loss_type)
	`), 0o644)
	toml := "config file " + filepath.Join(dir, "train.toml")
	cases := []struct {
		name, toml string
		args       []string
		want       string
		key, from  string
	}{
		{"defaults", "", nil, "0.02	0.2	10	-	grpo", "", ""},
		{"bare name override", "", []string{"beta=0.05", "grpo.epsilon=0.1"}, "0.05	0.1	10	-	grpo", "", ""},
		{"a setting the recipe never named", "", []string{"loss_type=dapo"}, "0.02	0.2	10	-	dapo", "", ""},
		{"bare name in toml", "beta = 0.07\n", nil, "0.07\t0.2\t10\t-\tgrpo", "", ""},
		{"section in toml", "[grpo]\nepsilon = 0.3\nloss_type = \"bnpo\"\n", nil, "0.02\t0.3\t10\t-\tbnpo", "", ""},
		{"a recipe table", "", []string{`grid.loss_type=["grpo", "dapo"]`}, "0.02\t0.2\t10\tdapo\tgrpo", "", ""},
		{"two names on the command line", "", []string{"beta=0.1", "grpo.beta=0.2"}, "", "grpo.beta", "command line"},
		{"two names in toml", "beta = 0.1\n[grpo]\nbeta = 0.2\n", nil, "", "grpo.beta", toml},
		{"nan override", "", []string{"beta=nan"}, "", "beta", "command line"},
		{"inf in toml", "[grpo]\nbeta = inf\n", nil, "", "grpo.beta", toml},
		{"misspelt setting", "", []string{"grpo.klcoef=1"}, "", "grpo.klcoef", "command line"},
		{"a section's check", "", []string{"grpo.beta=-1"}, "", "", ""},
		{"an integer setting given a fraction", "", []string{"grpo.num_iterations=2.5"}, "", "grpo.num_iterations", ""},
		{"rule: integer", "", []string{"steps=0"}, "", "steps", ""},
		{"rule: interval", "", []string{"frac=1.5"}, "", "frac", ""},
		{"rule: one of", "", []string{"mode=c"}, "", "mode", ""},
		{"rule: function", "", []string{"even=3"}, "", "even", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			toml := filepath.Join(dir, "train.toml")
			os.Remove(toml)
			if c.toml != "" {
				os.WriteFile(toml, []byte(c.toml), 0o644)
			}
			out, err := runLua(t, Options{Args: c.args, Recipe: recipe}, "", "")
			checkConfigOutcome(t, strings.TrimSpace(out), err, c.want, c.key, c.from)
		})
	}
}

// TestConfigSoftOverlong: reward.soft_overlong is a setting of the reward section, recorded
// with the config like every other, and a length longer than the rollout's max_new_tokens is
// refused by rook.config, before any work, as a *ConfigError naming the setting.
func TestConfigSoftOverlong(t *testing.T) {
	dir := t.TempDir()
	recipe := filepath.Join(dir, "train.lua")
	os.WriteFile(recipe, []byte(`
		local rook = require("rook")
		local cfg = rook.config{ rollout = { max_new_tokens = 72 }, reward = { malformed = -0.3 } }
		local o = cfg.reward.soft_overlong
		print(o.max_completion_len, o.soft_punish_cache, o.penalty_factor)
	`), 0o644)
	for _, c := range []struct {
		name string
		args []string
		want string // the output; "" for an error naming key
		key  string
	}{
		{"off by default", nil, "0	0	1", ""},
		{"set by its section", []string{"reward.soft_overlong.soft_punish_cache=24", "reward.soft_overlong.penalty_factor=0.5"}, "0	24	0.5", ""},
		{"set by its own name", []string{"soft_punish_cache=24", "max_completion_len=72"}, "72	24	1", ""},
		{"cache longer than max_new_tokens", []string{"soft_punish_cache=73"}, "", "reward.soft_overlong.soft_punish_cache"},
		{"max longer than max_new_tokens", []string{"max_completion_len=80"}, "", "reward.soft_overlong.max_completion_len"},
		{"max_new_tokens shorter than the cache", []string{"soft_punish_cache=24", "rollout.max_new_tokens=16"}, "", "reward.soft_overlong.soft_punish_cache"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			e, err := New(Options{Args: c.args, Recipe: recipe, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			err = e.RunFile(context.Background(), recipe)
			checkConfigOutcome(t, strings.TrimSpace(out.String()), err, c.want, c.key, "") // a check across sections: no one source
			if c.want == "" {
				return
			}
			rec, _ := e.config["reward"].(map[string]any)["soft_overlong"].(map[string]any)
			if got := fmt.Sprintf("%v\t%v\t%v", rec["max_completion_len"], rec["soft_punish_cache"], rec["penalty_factor"]); got != c.want {
				t.Errorf("recorded soft_overlong %v, want %s", rec, c.want)
			}
		})
	}
	for _, arg := range []string{"penalty_factor=-1", "soft_punish_cache=-1"} {
		_, err := runLua(t, Options{Args: []string{arg}, Recipe: recipe}, "", "")
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "reward: soft_overlong."+strings.Split(arg, "=")[0]+" must be") {
			t.Errorf("%s: %v, want a *ConfigError naming the setting", arg, err)
		}
	}
}

func TestConfigRuleSyntax(t *testing.T) {
	for _, c := range []struct {
		rules, want string
	}{
		{`{ nope = "integer" }`, `config rules: nope: not a key of the config`},
		{`{ n = "between 1 and 2" }`, `config rules: n: rule "between 1 and 2" is not one of`},
		{`{ n = "[2, 1]" }`, `want an interval [lo, hi]`},
		{`{ n = ">= x" }`, `"x" is not a number`},
		{`{ n = 5 }`, `a rule is a string or a function, got a number`},
	} {
		_, err := runLua(t, Options{Quiet: true}, "r.lua", `require("rook").config({ n = 1 }, `+c.rules+`)`)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.rules, err, c.want)
		}
	}
}
