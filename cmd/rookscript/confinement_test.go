//go:build unix

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConfinedRecipeRedTeam runs recipes written to attack their runner through the binary,
// each in a working directory seeded with what an attacker wants (.bashrc, .ssh/, .git/, a
// scripts/ folder), beside a home directory and a cache, and checks the exit code, what the
// refusal says, and that nothing outside the run directories changed: a hash of every file
// and folder under the three, before and after. The rows are docs/SECURITY.md's table.
func TestConfinedRecipeRedTeam(t *testing.T) {
	t.Parallel()
	const run = `local rook = require("rook"); rook.config({ run_dir = "runs/x" }); `
	const opened = run + `local p = rook.load("random:tiny"); assert(rook.run{ dir = "runs/x", policy = p, opt = rook.adamw(p) }); `
	for _, c := range []struct {
		name  string
		flags []string // before the recipe
		args  []string // after it
		src   string   // $HOME, $CACHE: those folders
		code  int
		want  string
	}{
		// The probes.
		{name: "base_dir a dot-file", src: `local rook = require("rook"); rook.config({ base_dir = ".bashrc" }); io.open(".bashrc", "a"):write("evil")`,
			code: 2, want: "dot-file or dot-folder"},
		{name: "base_dir a dot-file, refusal caught", src: `local rook = require("rook"); pcall(rook.config, { base_dir = ".bashrc" }); io.open(".bashrc", "a"):write("evil")`,
			code: 1, want: "a confined recipe cannot write .bashrc"},
		{name: "base_dir .ssh", src: `local rook = require("rook"); pcall(rook.config, { base_dir = ".ssh" }); io.open(".ssh/authorized_keys", "a"):write("ssh-ed25519 evil")`,
			code: 1, want: "cannot write .ssh/authorized_keys"},
		{name: "run_dir .git under pcall", src: `local rook = require("rook"); pcall(rook.config, { run_dir = ".git" }); io.open(".git/hooks/pre-commit", "w"):write("evil")`,
			code: 1, want: "cannot write .git/hooks/pre-commit"},
		{name: "a module for a later run", src: run + `io.open("scripts/schedules.lua", "w"):write("os.execute('evil')")`,
			code: 1, want: "cannot write the Lua file scripts/schedules.lua"},
		{name: "the cached default model", src: `local rook = require("rook"); assert(rook.load("random:tiny"):save(rook.cache_dir() .. "/default-model-v1/model"))`,
			code: 1, want: "cannot write $CACHE/default-model-v1/model"},
		{name: "a file named by a number", src: run + `io.open(31337, "w")`, code: 1, want: "cannot write 31337"},
		{name: "a rename between numbers", src: run + `os.rename(31337, 31339)`, code: 1, want: "cannot write 31337"},
		{name: "spinning", flags: []string{"--lua-time-limit=1s"}, src: "local x = 0\nwhile true do x = x + 1 end",
			code: 4, want: "attack.lua:2: the recipe ran Lua for 1s without calling into the engine"},
		{name: "a doubling string", flags: []string{"--lua-memory=64MiB"}, src: "local s = 'x'\nfor i = 1, 40 do s = s .. s end",
			code: 4, want: "attack.lua:2: the recipe's Lua memory passed 64 MiB"},
		{name: "string.rep", flags: []string{"--lua-memory=64MiB"}, src: `local s = string.rep("x", 2^34)`,
			code: 4, want: "attack.lua:1: the recipe's Lua memory passed 64 MiB"},
		{name: "a growing table", flags: []string{"--lua-memory=64MiB"}, src: "local t = {}\nwhile true do t[#t + 1] = { #t } end",
			code: 4, want: "the recipe's Lua memory passed 64 MiB"},
		{name: "the strings' metatable", src: `getmetatable("").__index.upper = function() return "evil" end`,
			code: 1, want: "string is read-only in a confined recipe"},
		// Probes of our own.
		{name: "string table", src: `string.format = nil`, code: 1, want: "string is read-only"},
		{name: "io.lines of a dot-file at home", src: `for l in io.lines("$HOME/.bashrc") do end`, code: 1, want: "cannot read $HOME/.bashrc"},
		{name: "a dot-file beside the recipe", src: `io.open(".ssh/authorized_keys")`, code: 1, want: "cannot read .ssh/authorized_keys"},
		{name: "io.output", src: `io.output(".bashrc")`, code: 1, want: "cannot write .bashrc"},
		{name: "os.remove", src: run + `os.remove(".bashrc")`, code: 1, want: "cannot write .bashrc"},
		{name: "os.tmpname", src: `os.tmpname()`, code: 1, want: "os.tmpname is not available"},
		{name: "a coroutine", src: `coroutine.wrap(function() io.open(".bashrc", "a") end)()`, code: 1, want: "cannot write .bashrc"},
		{name: "package.preload", src: `package.preload.schedules = function() return {} end`, code: 1, want: "package.preload is read-only"},
		{name: "package.loaded", src: `require("rook"); package.loaded.rook.load = nil`, code: 1, want: "rook is read-only"},
		{name: "module rook", src: `local rook = require("rook"); rook.grpo.step = nil`, code: 1, want: "rook.grpo is read-only"},
		{name: "an embedded module's globals", src: `local s = require("schedules"); setfenv(s.kl_warmup, {})`, code: 1, want: "setfenv: the function's globals are an embedded module's"},
		{name: "rawset on a module", src: `rawset(require("schedules"), "kl_warmup", print)`, code: 1, want: "rawset: schedules is read-only"},
		{name: "a Lua file in the run directory", src: run + `io.open("runs/x/schedules.lua", "w")`, code: 1, want: "cannot write the Lua file"},
		{name: "a rename to a Lua file", src: opened + `io.open("runs/x/a.txt", "w"):close(); os.rename("runs/x/a.txt", "runs/x/a.lua")`,
			code: 1, want: "cannot write the Lua file runs/x/a.lua"},
		{name: "a model saved as a Lua name", src: run + `assert(rook.load("random:tiny"):save("runs/x/m.lua"))`, code: 1, want: "cannot write the Lua file"},
		{name: "a Stockfish cache in a dot-file", src: `require("rook").stockfish{ cache_file = ".bashrc" }`, code: 1, want: "cannot write .bashrc"},
		{name: "the working directory as run_dir", src: `require("rook").config({ run_dir = "." })`, code: 2, want: "is the working directory or a folder above it"},
		{name: "home as run_dir", src: `require("rook").config({ run_dir = "$HOME" })`, code: 2, want: "run directory is a new folder inside the working directory"},
		{name: "a dot-folder named on the command line", src: `require("rook").config({ run_dir = "" })`, args: []string{"run_dir=.git"},
			code: 2, want: "run_dir=.git: "},
		{name: "out= a dot-file", src: `require("rook").config({ out = "" })`, args: []string{"out=.bashrc"}, code: 2, want: "out=.bashrc: "},
		{name: "a run directory through ..", src: `require("rook").config({ run_dir = "runs/../.git" })`, code: 2, want: "dot-file or dot-folder"},
		{name: "a child recipe's run_dir", src: `require("rook").exec("child.lua", { run_dir = ".git" })`, code: 1, want: "dot-file or dot-folder"},
		{name: "bytecode", src: `load(string.dump(print))`, code: 1, want: "string.dump is not available"},
		{name: "os.execute through getfenv", src: `getfenv(0).os.execute("touch evil")`, code: 1, want: "os.execute is not available"},
		{name: "os.exit", src: `pcall(os.exit, 5); print("went on")`, code: 5},
		// What a recipe may do, done.
		{name: "its own run directory", src: opened + `local f = assert(io.open("runs/x/note.txt", "w")); f:write("ok"); f:close()
			assert(io.open("runs/x/note.txt")):seek("end")`, code: 0},
		{name: "its own folder, read", src: `assert(io.open("attack.lua")):seek("end")`, code: 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tmp := t.TempDir()
			work, home, cache := filepath.Join(tmp, "work"), filepath.Join(tmp, "home"), filepath.Join(tmp, "cache")
			seed(t, map[string]string{
				"work/.bashrc": "# the user's\n", "work/.ssh/authorized_keys": "ssh-ed25519 AAAA user\n", "work/.git/HEAD": "ref: refs/heads/main\n",
				"work/.git/hooks/README": "hooks\n", "work/scripts/notes.txt": "notes\n",
				"work/child.lua": `require("rook").config({ run_dir = "" })` + "\n",
				"home/.bashrc":   "# home\n", "home/.ssh/id_ed25519": "secret\n", "cache/default-model-v1/train.txt": "P: rows\n",
			}, tmp)
			src := strings.NewReplacer("$HOME", home, "$CACHE", cache).Replace(c.src)
			if err := os.WriteFile(filepath.Join(work, "attack.lua"), []byte(src+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			before := treeHash(t, tmp, filepath.Join(work, "runs"))
			args := append(append(append([]string{}, c.flags...), "attack.lua"), c.args...)
			code, out, errOut := rookscript(t, work, []string{"HOME=" + home, "ROOKSCRIPT_CACHE=" + cache}, args...)
			wantExit(t, c.name, code, c.code, out, errOut)
			if want := strings.NewReplacer("$HOME", home, "$CACHE", cache).Replace(c.want); !strings.Contains(out+errOut, want) {
				t.Fatalf("the output lacks %q:\nstdout:\n%s\nstderr:\n%s", want, out, errOut)
			}
			if after := treeHash(t, tmp, filepath.Join(work, "runs")); after != before {
				t.Fatalf("files outside the run directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestInterruptPureLua: Ctrl-C stops a recipe that stays in pure Lua, where no step boundary
// ever comes, within a few seconds, as an abort: its run keeps the checkpoint it had.
func TestInterruptPureLua(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	recipe := filepath.Join(tmp, "spin.lua")
	os.WriteFile(recipe, []byte(`local rook = require("rook")
local p = rook.load("random:tiny")
local run = assert(rook.run{ dir = "`+filepath.Join(tmp, "run")+`", policy = p, opt = rook.adamw(p) })
print("spinning")
while true do end
`), 0o644)
	p := start(t, tmp, nil, "--lua-time-limit=0", "--quiet", recipe, "run_dir="+filepath.Join(tmp, "run"))
	p.waitFor(t, "spinning")
	begin := time.Now()
	p.signal(t, syscall.SIGINT)
	code, out, errOut := p.wait()
	wantExit(t, "interrupted in pure Lua", code, 130, out, errOut)
	wantContains(t, "stderr", errOut, "aborted by SIGINT")
	if d := time.Since(begin); d > 30*time.Second {
		t.Fatalf("the interrupt took %s", d)
	}
}

// seed writes files (path under root → text).
func seed(t *testing.T, files map[string]string, root string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// treeHash lists every file and folder under root but skip, with its mode and content hash.
func treeHash(t *testing.T, root, skip string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == skip {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		sum := ""
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			sum = hex.EncodeToString(h[:8])
		}
		rel, _ := filepath.Rel(root, p)
		lines = append(lines, rel+" "+fi.Mode().String()+" "+sum)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
