package luabind

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRecipesSpellSettingsOnce: no recipe or module takes settings apart by hand. An engine
// call's settings live in their section (cfg.grpo) and reach the call as they are: nothing
// calls the removed rook.settings or rook.check, and no option table copies one setting out
// of a section (`beta = cfg.grpo.beta`).
func TestRecipesSpellSettingsOnce(t *testing.T) {
	files, err := filepath.Glob("../recipes/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recipes (%v)", err)
	}
	scripts, _ := filepath.Glob("../scripts/*.lua")
	gone := regexp.MustCompile(`rook\.(settings|check)\b`)
	copied := regexp.MustCompile(`(\w+)\s*=\s*cfg\.(\w+)\.(\w+)\s*(?:[,}]|$|--)`)
	for _, f := range append(files, scripts...) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			if m := gone.FindString(line); m != "" {
				t.Errorf("%s:%d: %s is gone: a section is its call's settings", filepath.Base(f), i+1, m)
			}
			for _, m := range copied.FindAllStringSubmatch(line, -1) {
				if key, sec, from := m[1], m[2], m[3]; key == from && sectionNamed(sec) != nil {
					t.Errorf("%s:%d: the setting %q copied by hand (%s): pass its section", filepath.Base(f), i+1, key, strings.TrimSpace(m[0]))
				}
			}
		}
	}
}

// TestBareSettingNames: a key=value argument reaches a section's setting by its own name when
// one declared section has it, and a recipe's own key wins over a section's setting of the
// same name. It is also the table of the messages a user meets for a bad key=value, as they
// read them.
func TestBareSettingNames(t *testing.T) {
	const src = `
		local rook = require("rook")
		local cfg = rook.config{ depth = 3, threads = 0, reward = { malformed = -0.3 }, stockfish = { depth = 8 } }
		print(cfg.reward.malformed, cfg.depth, cfg.stockfish.depth, cfg.stockfish.hash_mb, cfg.threads, cfg.stockfish.threads)`
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "-0.3\t3\t8\t16\t0\t1"},
		{[]string{"malformed=-0.2"}, "-0.2\t3\t8\t16\t0\t1"},
		{[]string{"depth=5", "stockfish.depth=6", "hash_mb=64"}, "-0.3\t5\t6\t64\t0\t1"},
		{[]string{"threads=2", "stockfish.threads=1"}, "-0.3\t3\t8\t16\t2\t1"},
		{[]string{"malformed=-0.1", "reward.malformed=-0.2"}, `recipe.lua:3: command line: reward.malformed: malformed and reward.malformed both set it (one setting by two names): give it once`},
		{[]string{"reward.malformd=-1"}, `recipe.lua:3: command line: unknown option "reward.malformd" (did you mean "malformed"?)`},
		{[]string{"malformed=x"}, `recipe.lua:3: command line: malformed: want a number, got "x"`},
		{[]string{"kl_coef=0.1"}, `recipe.lua:3: command line: unknown key "kl_coef"`}, // no grpo section here
		{[]string{"grpo.beta=0.1"}, `recipe.lua:3: command line: grpo.beta: this recipe has no grpo section`},
		{[]string{"reward=1"}, `recipe.lua:3: command line: reward: a table of settings: set one of them (reward.KEY=VALUE)`},
		{[]string{"reward.policy=1"}, `command line: reward.policy: a table of settings: set one of them (reward.policy.KEY=VALUE)`},
		{[]string{"reward.policy.best_rank=0.5"}, "-0.3\t3\t8\t16\t0\t1"},
		{[]string{"stockfish.depth=0"}, `recipe.lua:3: stockfish: depth must be ≥ 1, got 0`},
	} {
		out, err := runLua(t, Options{Args: c.args}, "recipe.lua", src)
		got := strings.TrimSpace(out)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%v: got %q, want %q", c.args, got, c.want)
		}
	}
	// A name two sections share must be written with its section.
	_, err := runLua(t, Options{Args: []string{"depth=9"}}, "recipe.lua", `
		local cfg = require("rook").config{ reward = {}, stockfish = {} }`)
	if err == nil || !strings.Contains(err.Error(), `depth: a setting of several sections: write reward.depth or stockfish.depth`) {
		t.Errorf("an ambiguous name: %v", err)
	}
}
