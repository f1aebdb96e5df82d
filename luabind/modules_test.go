package luabind_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/luabind"
)

// runRecipe writes files under dir (name → source) and runs dir/recipe.lua, returning its
// output and error.
func runRecipe(t *testing.T, dir string, files map[string]string) (string, error) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	recipe := filepath.Join(dir, "recipe.lua")
	env, err := luabind.New(luabind.Options{Recipe: recipe, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	err = env.RunFile(context.Background(), recipe)
	return out.String(), err
}

// A module file in the working directory never replaces an embedded module, nor is it found
// at all: only scripts/ beside the recipe is searched.
func TestModulesIgnoreTheWorkingDirectory(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	stray := `error("the stray module was loaded")`
	for _, p := range []string{"schedules.lua", "scripts/schedules.lua", "helper.lua", "scripts/helper.lua"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(cwd, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cwd, p), []byte(stray), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runRecipe(t, t.TempDir(), map[string]string{
		"recipe.lua": `local s = require("schedules"); assert(type(s.kl_warmup) == "function")
local ok, msg = pcall(require, "helper"); assert(not ok, "helper must not be found"); print(msg)`,
	})
	if err != nil {
		t.Fatalf("recipe by absolute path picked up the working directory's modules: %v", err)
	}
	if strings.Contains(out, "stray") || !strings.Contains(out, "module helper not found") {
		t.Errorf("unexpected output:\n%s", out)
	}
}

// scripts/ beside the recipe holds the recipe's own modules and may override an embedded
// one, which a warning says before the recipe starts (ShadowWarnings).
func TestModulesBesideTheRecipe(t *testing.T) {
	dir := t.TempDir()
	out, err := runRecipe(t, dir, map[string]string{
		"scripts/schedules.lua": `return { local_copy = true }`,
		"scripts/mine/util.lua": `return { answer = 42 }`,
		"recipe.lua": `assert(require("schedules").local_copy)
assert(require("mine.util").answer == 42)`,
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := luabind.New(luabind.Options{Recipe: filepath.Join(dir, "recipe.lua")})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	want := []string{"warning: " + filepath.Join(dir, "scripts", "schedules.lua") + " replaces the embedded module schedules for this recipe"}
	if got := e.ShadowWarnings(); !slices.Equal(got, want) {
		t.Errorf("warnings %q, want %q (a module that overrides nothing is not one)", got, want)
	}
	if strings.Contains(out, "schedules") {
		t.Errorf("the recipe's output speaks of the override:\n%s", out)
	}
}

// Syntax errors name the file and line, also for a block left open at the end of the file
// (gopher-lua alone says only "at EOF").
func TestSyntaxErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"for", "local x = 1\nfor i = 1, 3 do\n  print(i)\n\nlocal y = 2\n", "recipe.lua:5: 'end' expected (to close 'for' at line 2) near <eof>"},
		{"function", "local function f()\n  return 1\n", "recipe.lua:2: 'end' expected (to close 'function' at line 1) near <eof>"},
		{"inner if", "function f()\n  if x then\n    y()\n  end\n  while true do\n", "recipe.lua:5: 'end' expected (to close 'while' at line 5) near <eof>"},
		{"repeat", "local s = \"((\"\nrepeat\n  x = 1\n", "recipe.lua:3: 'until' expected (to close 'repeat' at line 2) near <eof>"},
		{"table", "local t = {\n  a = 1,\n", "recipe.lua:2: '}' expected (to close '{' at line 1) near <eof>"},
		{"token", "local x = 1\nif x then\n  print(x\nend\n", "recipe.lua:4: syntax error near 'end'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runRecipe(t, t.TempDir(), map[string]string{"recipe.lua": tc.src})
			if err == nil {
				t.Fatal("no error")
			}
			if msg := err.Error(); !strings.HasSuffix(msg, tc.want) {
				t.Errorf("got  %q\nwant …%q", msg, tc.want)
			}
		})
	}
	// The same for a module that does not parse.
	_, err := runRecipe(t, t.TempDir(), map[string]string{
		"scripts/broken.lua": "return {\n",
		"recipe.lua":         `require("broken")`,
	})
	if err == nil || !strings.Contains(err.Error(), filepath.Join("scripts", "broken.lua")+":1: '}' expected (to close '{' at line 1)") {
		t.Errorf("module syntax error: %v", err)
	}
}

// A failed assert — a recipe's own check, or assert(rook.load(path)) on an expected failure —
// is the message with file:line, without a Lua traceback (which would only show assert); an
// error raised elsewhere keeps its traceback.
func TestAssertMessages(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"message", "local x = 1\nassert(x == 2, \"x must be 2\")\n", "recipe.lua:2: x must be 2"},
		{"no message", "local x = 1\nassert(x == 2)\n", "recipe.lua:2: assertion failed!"},
		{"nil, err", "local rook = require(\"rook\")\nassert(rook.load(\"random:nope\"))\n", `recipe.lua:2: random:nope: unknown random model "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runRecipe(t, t.TempDir(), map[string]string{"recipe.lua": tc.src})
			var re *luabind.RecipeError
			if !errors.As(err, &re) || !strings.Contains(re.Message, tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if re.Traceback != "" {
				t.Errorf("a failed assert carries a traceback:\n%s", re.Traceback)
			}
		})
	}
	_, err := runRecipe(t, t.TempDir(), map[string]string{"recipe.lua": "local t = nil\nprint(t.x)\n"})
	if re := (*luabind.RecipeError)(nil); !errors.As(err, &re) || re.Traceback == "" {
		t.Errorf("an error in Lua code lost its traceback: %v", err)
	}
}
