package luabind

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfinement: a recipe run without --trust finds every way out closed — processes,
// native code, bytecode, the debug library, files outside the run, the cache, the environment —
// along every path Lua offers back to them (getfenv, a string's metatable, package.loaded, a
// coroutine, load); each refusal says what was refused and how to allow it. What the run needs
// stays open: its run directory, its own folder and the cache (read only), the paths named on
// the command line. With Trust the same probes go through. (cmd/rookscript's
// TestConfinedRecipeRedTeam runs the probes of docs/SECURITY.md through the binary.) (A module is named, never a path:
// trusted or not, require refuses one that climbs out of scripts/.)
func TestConfinement(t *testing.T) {
	tmp := t.TempDir()
	recipeDir := filepath.Join(tmp, "recipe")
	named := filepath.Join(tmp, "named.txt")
	outside := filepath.Join(tmp, "outside")
	for _, d := range []string{recipeDir, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret.txt")
	os.WriteFile(secret, []byte("secret"), 0o644)
	os.WriteFile(filepath.Join(recipeDir, "data.txt"), []byte("shipped"), 0o644)
	os.WriteFile(named, []byte("named"), 0o644)
	os.Symlink(outside, filepath.Join(recipeDir, "link")) // a link inside an allowed folder leads out
	t.Setenv("ROOKSCRIPT_CACHE", filepath.Join(tmp, "cache"))
	t.Setenv("ROOKSCRIPT_TEST_SECRET", "s3cret")
	recipe := filepath.Join(recipeDir, "probe.lua")

	// Each probe is a chunk run in the recipe's environment; "" means it must be refused.
	for _, c := range []struct {
		name, src, refused string
	}{
		{"os.execute", `os.execute("true")`, "os.execute is not available to a confined recipe (it starts processes)"},
		{"io.popen", `io.popen("id")`, "io.popen is not available"},
		{"read outside", `io.open(SECRET)`, "a confined recipe cannot read " + secret},
		{"read through a link", `io.open(RECIPEDIR .. "/link/secret.txt")`, "cannot read"},
		{"write outside", `io.open(OUTSIDE .. "/new.txt", "w")`, "cannot write"},
		{"append outside", `io.open(SECRET, "a")`, "cannot write"},
		{"write into its own folder", `io.open(RECIPEDIR .. "/x.lua", "w")`, "cannot write"},
		{"io.lines", `for l in io.lines(SECRET) do end`, "cannot read"},
		{"io.output", `io.output(OUTSIDE .. "/o.txt")`, "cannot write"},
		{"os.remove", `os.remove(SECRET)`, "cannot write " + secret},
		{"os.rename", `os.rename(SECRET, RUNDIR .. "/stolen")`, "cannot write " + secret},
		{"os.tmpname", `os.tmpname()`, "os.tmpname is not available"},
		{"os.getenv", `os.getenv("ROOKSCRIPT_TEST_SECRET")`, `os.getenv("ROOKSCRIPT_TEST_SECRET") is not available`},
		{"package.loadlib", `package.loadlib("/lib/libc.so.6", "system")`, "package.loadlib is not available"},
		{"string.dump", `string.dump(print)`, "string.dump is not available"},
		{"a string's metatable", `getmetatable("").__index.dump(print)`, "string.dump is not available"},
		{"binary chunk", `load("\27Lua\81\0")`, "load of a binary chunk is not available"},
		{"loadstring of bytecode", `loadstring("\27LuaQ")`, "loadstring of a binary chunk"},
		{"dofile", `dofile(SECRET)`, "cannot read"},
		{"loadfile", `loadfile(SECRET)`, "cannot read"},
		{"getfenv", `getfenv(0).os.execute("true")`, "os.execute is not available"},
		{"setfenv", `local f = function() return os end; setfenv(f, {}); getfenv(1).os.execute("true")`, "os.execute is not available"},
		{"package.loaded", `package.loaded.os.execute("true")`, "os.execute is not available"},
		{"coroutine.wrap", `coroutine.wrap(function() io.popen("id") end)()`, "io.popen is not available"},
		{"load with its own environment", `local f = loadstring("return os.execute"); setfenv(f, { os = os }); f()("true")`, "os.execute is not available"},
		{"debug.getregistry", `assert(debug.getregistry == nil and debug.getupvalue == nil and debug.sethook == nil, "debug escape"); error("closed")`, "closed"},
		{"require of a path", `require("../outside/secret")`, "a module is named a.b.c"},
		{"require climbing", `require("..secret")`, "a module is named a.b.c"},
		{"rook.exists outside", `rook.exists(SECRET)`, "cannot read"},
		{"rook.load outside", `rook.load(OUTSIDE .. "/model")`, "cannot read"},
		{"rook.positions outside", `rook.positions(SECRET)`, "cannot read"},
		{"rook.run outside", `local p = rook.load("random:tiny"); rook.run{ dir = OUTSIDE .. "/run", policy = p, opt = rook.adamw(p) }`, "run directory is a new folder inside the working directory or a path named on the command line"},
		{"rook.exec outside", `rook.exec(OUTSIDE .. "/other.lua")`, "cannot read"},
		{"model:save outside", `rook.load("random:tiny"):save(OUTSIDE .. "/m")`, "cannot write"},
		{"a Stockfish that is not one", `rook.stockfish{ path = "/bin/sh" }`, "rook.stockfish: the engine binary /bin/sh was not named on the command line"},
		{"a Stockfish cache outside", `rook.stockfish{ cache_file = OUTSIDE .. "/c.jsonl" }`, "cannot write"},
		// What the run needs stays open.
		{"read its own folder", `assert(io.open(RECIPEDIR .. "/data.txt")):close()`, ""},
		{"read a named path", `assert(io.open(NAMED)):read("*a")`, ""},
		{"write its run directory", `assert(io.open(RUNDIR .. "/note.txt", "w")):close()`, ""},
		{"write the cache", `io.open(rook.cache_dir() .. "/x", "w")`, "cannot write " + filepath.Join(tmp, "cache") + "/x"},
		{"read the cache", `local f = io.open(rook.cache_dir() .. "/x"); if f then f:close() end`, ""},
		{"an allowed variable", `os.getenv("LANG")`, ""},
		{"a module beside the recipe", `pcall(require, "missing.module")`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			runDir := filepath.Join(t.TempDir(), "run") // empty: a new run may start there
			os.MkdirAll(runDir, 0o755)
			os.MkdirAll(filepath.Join(tmp, "cache"), 0o755)
			args := []string{"run_dir=" + runDir, "data=" + named}
			prelude := strings.NewReplacer("\\", "\\\\").Replace(
				`local rook = require("rook"); rook.config{ run_dir = "` + runDir + `", data = "" }; SECRET, OUTSIDE, RECIPEDIR, RUNDIR, NAMED = "` +
					secret + `", "` + outside + `", "` + recipeDir + `", "` + runDir + `", "` + named + `"; `)
			os.WriteFile(recipe, []byte(prelude+c.src+"\n"), 0o644)
			_, err := runLua(t, Options{Args: args, Recipe: recipe, Quiet: true}, "", "")
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("refused what the run needs: %v", err)
			case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
				t.Fatalf("error %v, want %q", err, c.refused)
			case c.refused != "" && c.refused != "closed" && !strings.HasPrefix(c.name, "require") && !strings.Contains(err.Error(), "--trust"):
				t.Errorf("the refusal does not say how to allow it: %v", err)
			}
		})
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret" {
		t.Fatalf("the secret file changed: %q", b)
	}

	// Trusted, the same calls go through.
	args := []string{"data=" + named}
	os.WriteFile(recipe, []byte(`assert(io.open("`+secret+`")):close(); assert(os.getenv("ROOKSCRIPT_TEST_SECRET") == "s3cret")
		local f = assert(io.popen("echo ok")); assert(f:read("*l") == "ok"); f:close()`), 0o644)
	if _, err := runLua(t, Options{Args: args, Recipe: recipe, Quiet: true, Trust: true}, "", ""); err != nil {
		t.Fatalf("trusted: %v", err)
	}
}
