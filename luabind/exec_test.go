package luabind

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecCheck: rook.exec's check runs a recipe only until its rook.config has resolved and
// checked the overrides — the resolved config back, or nil and an error naming the key —
// and nothing after it runs, not even behind a pcall; a recipe that calls rook before its
// config is not run. catch returns a failure instead of raising it.
func TestExecCheck(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("ROOKSCRIPT_CACHE", filepath.Join(tmp, "cache"))
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("child.lua", `local rook = require("rook")
local cfg = rook.config({ steps = 3, run_dir = "", grpo = { beta = 0.05 } }, { steps = "integer >= 1" })
print("ran past rook.config")
return { steps = cfg.steps }
`)
	write("swallow.lua", `local rook = require("rook")
pcall(rook.config, { steps = 3 })
print("ran past rook.config")
`)
	write("early.lua", `local rook = require("rook")
rook.log("before the config")
rook.config({ steps = 3 })
`)
	write("fails.lua", `local rook = require("rook")
rook.config({ steps = 3 })
error("boom")
`)
	runs := filepath.Join(tmp, "runs") // base_dir: a folder of runs
	held := filepath.Join(runs, "held")
	os.MkdirAll(filepath.Join(held, "checkpoints"), 0o755)
	os.WriteFile(filepath.Join(held, "checkpoints", "LATEST"), []byte("step-00000001\n"), 0o644)
	parent := filepath.Join(tmp, "parent.lua")
	for _, c := range []struct{ name, src, want string }{
		{"resolved", `local cfg = assert(rook.exec("child.lua", { steps = 5, beta = 0.1 }, { check = true }))
			assert(cfg.steps == 5 and cfg.grpo.beta == 0.1 and cfg.grpo.epsilon, "not the resolved config")`, ""},
		{"unknown key", `print(rook.exec("child.lua", { stpes = 5 }, { check = true }))`, `nil	` + filepath.Join(tmp, "child.lua") + `:2: command line: unknown key "stpes" (did you mean "steps"?)`},
		{"rule", `print(rook.exec("child.lua", { steps = 0 }, { check = true }))`, "nil	" + filepath.Join(tmp, "child.lua") + ":2: steps must be an integer"},
		{"bad setting", `print(rook.exec("child.lua", { grpo = { beta = -1 } }, { check = true }))`, "child.lua:2: grpo: beta must be"},
		{"run directory", `print(rook.exec("child.lua", { run_dir = HELD }, { check = true }))`, "already holds checkpoints"},
		{"pcall cannot go on", `print(rook.exec("swallow.lua", {}, { check = true }))`, "table:"},
		{"rook before config", `print(rook.exec("early.lua", {}, { check = true }))`, "early.lua calls rook.log before rook.config"},
		{"catch", `print(rook.exec("fails.lua", {}, { catch = true }))`, "boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := `local rook = require("rook"); HELD = "` + held + `"; ` + c.src
			os.WriteFile(parent, []byte(src), 0o644)
			out, err := runLua(t, Options{Recipe: parent, Args: []string{"base_dir=" + runs}, Quiet: true}, "", "")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, "ran past rook.config") || strings.Contains(out, "before the config") {
				t.Errorf("the check ran the recipe on:\n%s", out)
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("output %q lacks %q", out, c.want)
			}
		})
	}
	// Without catch a failure raises; an unknown option is an error.
	for src, want := range map[string]string{
		`rook.exec("fails.lua")`:                      "rook.exec " + filepath.Join(tmp, "fails.lua") + ": ",
		`rook.exec("child.lua", {}, { chek = true })`: `unknown option "chek" (did you mean "check"?)`,
	} {
		os.WriteFile(parent, []byte(`local rook = require("rook"); `+src), 0o644)
		if _, err := runLua(t, Options{Recipe: parent, Quiet: true}, "", ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", src, err, want)
		}
	}
}
