package luabind

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestRecipesSpellSettingsOnce: no recipe copies an engine setting from its config into an
// option table by hand (`beta = cfg.beta`, `depth = cfg.stockfish_depth`): rook.settings
// takes them by name, so each setting is spelled once, in the recipe's rook.config defaults.
func TestRecipesSpellSettingsOnce(t *testing.T) {
	files, err := filepath.Glob("../recipes/*.lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recipes (%v)", err)
	}
	// key = cfg.name, the value nothing but the config's entry.
	copied := regexp.MustCompile(`(\w+)\s*=\s*cfg\.(\w+)\s*(?:[,}]|$|--)`)
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range copied.FindAllStringSubmatch(line, -1) {
				key, from := m[1], m[2]
				for _, g := range settingGroups {
					c, ok := g.flatCanonical(from)
					if !ok || g.of != nil {
						continue
					}
					names := append([]string{c}, schemaOf(g.typ).fields[c].aliases...)
					if slices.Contains(names, key) {
						t.Errorf("%s:%d: %s's setting %q copied by hand (%s): use rook.settings(cfg, %q)",
							filepath.Base(f), i+1, g.call, c, strings.TrimSpace(m[0]), g.name)
					}
				}
			}
		}
	}
}

// TestFlatConfigNames: a recipe's config accepts any flat name of a reward or Stockfish
// setting for the name the recipe declared (malformed_floor for malformed), and the pool's
// bare names stay the recipe's own: depth=5 sets the recipe's depth, not the pool's.
func TestFlatConfigNames(t *testing.T) {
	const src = `
		local rook = require("rook")
		local cfg = rook.config{ malformed = -0.3, stockfish_depth = 8, depth = 3, threads = 0 }
		local engine = rook.settings(cfg, "stockfish")
		print(cfg.malformed, cfg.stockfish_depth, cfg.depth, engine.depth, engine.threads)`
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "-0.3\t8\t3\t8\tnil"},
		{[]string{"malformed_floor=-0.2"}, "-0.2\t8\t3\t8\tnil"},
		{[]string{"depth=5", "stockfish_depth=6"}, "-0.3\t6\t5\t6\tnil"},
		{[]string{"malformed=-0.1", "malformed_floor=-0.2"}, `malformed already set "malformed" (the same setting)`},
		{[]string{"stockfish_hash_mb=64"}, `unknown key "stockfish_hash_mb"`},
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
}
