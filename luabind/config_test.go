package luabind

import (
	"context"
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
		want       string // output, or an error substring
	}{
		{"defaults", "", nil, "200\t1e-05\tbase\t0.95\tfalse\t-"},
		{"toml beside the recipe", "steps = 50\nname = \"t\"\n[opt]\nbetas = [0.8, 0.9]\n", nil, "50\t1e-05\tt\t0.9\tfalse\t-"},
		{"override beats toml", "steps = 50\n", []string{"steps=60", "flag=true"}, "60\t1e-05\tbase\t0.95\ttrue\t-"},
		{"config= names another file", "steps = 50\n", []string{"config=" + other}, "7\t1e-05\tbase\t0.95\tfalse\t-"},
		{"resume needs a run to resume", "", []string{"resume=runs/x"}, "resume=runs/x: runs/x is not a run directory"},
		{"unknown toml key", "stpes = 5\n", nil, `train.toml: unknown key "stpes" (did you mean "steps"?)`},
		{"toml type mismatch", "name = 5\n", nil, `key "name": want a string like the recipe's default, got a number`},
		{"nested unknown", "[opt]\nbeta = 1\n", nil, `unknown key "opt.beta"`},
		{"list element type", "", []string{`opt.betas=["a", "b"]`}, "element 1: want a number, got a string"},
		{"bad boolean", "", []string{"flag=yes"}, "want true or false"},
		{"missing config file", "", []string{"config=" + filepath.Join(dir, "nope.toml")}, "nope.toml"},
		{"open table takes any key", "", []string{"pass.model=random:tiny", "pass.size=8", "pass.xs=[1, 2]"}, "random:tiny\t8\t2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			toml := filepath.Join(dir, "train.toml")
			os.Remove(toml)
			if c.toml != "" {
				os.WriteFile(toml, []byte(c.toml), 0o644)
			}
			var out strings.Builder
			e, err := New(Options{Args: c.args, Recipe: recipe, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			err = e.RunFile(context.Background(), recipe)
			got := strings.TrimSpace(out.String())
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
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
