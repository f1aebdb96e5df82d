package luabind

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// A recipe is code someone may have sent, so it runs confined unless the user trusts it
// (--trust; the REPL, where the user types). Confined, it cannot start processes, load native
// code or bytecode, or reach the debug library's ways out, and it reads and writes files only
// where the run needs to: the run directory, the cache, the recipe's own folder (read only)
// and the paths the user named on the command line. The standard library tables are changed
// in place, so no path through getfenv, a string's metatable or package.loaded leads back to
// what was removed; every rook.* function that takes a path checks the same rule. As Redis'
// EVAL and Neovim's secure mode do, the confinement removes the ways out rather than trying
// to inspect what a script does with them.

// pathKeys are the command-line keys whose values name paths the user gives the recipe
// (a dotted key by its last part: pass.model).
var pathKeys = []string{"data", "model", "resume", "out", "run_dir", "config", "positions", "base_dir", "path", "cache_file"}

// envAllowed are the environment variables a confined recipe may read.
var envAllowed = []string{"ROOKSCRIPT_CACHE", "LANG", "TERM", "TZ"}

// access is what a confined recipe may touch: absolute, symlink-resolved roots.
type access struct {
	read, write []string
	named       []string // paths named on the command line, as given: a Stockfish binary among them
}

func (a *access) clone() *access {
	return &access{read: slices.Clone(a.read), write: slices.Clone(a.write), named: slices.Clone(a.named)}
}

// newAccess is the access of a recipe run with args: its folder, the cache, the paths the
// arguments name.
func newAccess(recipe string, args []override) *access {
	a := &access{}
	if recipe != "" {
		a.read = append(a.read, realPath(filepath.Dir(recipe)))
	}
	cache := cacheDir()
	a.read, a.write = append(a.read, realPath(cache)), append(a.write, realPath(cache))
	for _, o := range args {
		parts := strings.Split(o.key, ".")
		if slices.Contains(pathKeys, parts[len(parts)-1]) && o.raw != "" {
			p := realPath(o.raw)
			a.read, a.write, a.named = append(a.read, p), append(a.write, p), append(a.named, o.raw)
		}
	}
	return a
}

// realPath is p absolute, with the symlinks of its longest existing prefix resolved: a link
// inside an allowed directory must not lead out of it.
func realPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	rest := ""
	for dir := abs; ; dir = filepath.Dir(dir) {
		if resolved, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(resolved, rest)
		}
		if parent := filepath.Dir(dir); parent == dir {
			return abs
		} else {
			rest = filepath.Join(filepath.Base(dir), rest)
		}
	}
}

func within(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, r+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// ErrConfined is wrapped by every refusal of a confined recipe.
var ErrConfined = errors.New("run with --trust to lift the confinement for a recipe you wrote or checked")

// checkPath refuses path for a confined recipe unless it lies under a root for op ("read"
// or "write"); a trusted one may use any path.
func (e *Env) checkPath(op, path string) error {
	a := e.access
	if a == nil {
		return nil
	}
	roots := a.read
	if op == "write" {
		roots = a.write
	}
	if within(realPath(path), roots) {
		return nil
	}
	where := "the run directory, the cache and paths named on the command line"
	if op == "read" {
		where = "the recipe's folder, " + where
	}
	return fmt.Errorf("a confined recipe cannot %s %s (it may %s %s): name it on the command line (out=PATH, data=PATH, …), or %w",
		op, path, op, where, ErrConfined)
}

// mustPath raises checkPath's refusal.
func (e *Env) mustPath(L *lua.LState, op, path string) {
	if err := e.checkPath(op, path); err != nil {
		L.RaiseError("%s", err.Error())
	}
}

// allowRunDir lets a confined recipe write in its run directory: one named on the command
// line, or one inside the working directory (a recipe's default, runs/NAME).
func (e *Env) allowRunDir(dir string) error {
	if e.access == nil || dir == "" {
		return nil
	}
	p := realPath(dir)
	if within(p, e.access.write) {
		return nil
	}
	cwd, err := os.Getwd()
	if err != nil || !within(p, []string{realPath(cwd)}) || p == realPath(cwd) {
		return fmt.Errorf("a confined recipe's run directory is a new folder inside the working directory or a path named on the command line, not %s: give run_dir=PATH, or %w", dir, ErrConfined)
	}
	e.access.read, e.access.write = append(e.access.read, p), append(e.access.write, p)
	return nil
}

// confine takes the ways out of the standard library and puts path checks on what stays.
func (e *Env) confine() {
	L := e.L
	refuse := func(name, why string) *lua.LFunction {
		return L.NewFunction(func(L *lua.LState) int {
			L.RaiseError("%s is not available to a confined recipe (%s); %s", name, why, ErrConfined.Error())
			return 0
		})
	}
	wrap := func(t *lua.LTable, name string, check func(L *lua.LState)) {
		orig := t.RawGetString(name).(*lua.LFunction)
		t.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			check(L)
			top := L.GetTop()
			L.Push(orig)
			for i := 1; i <= top; i++ {
				L.Push(L.Get(i))
			}
			L.Call(top, lua.MultRet)
			return L.GetTop() - top
		}))
	}
	pathArg := func(n int, op func(L *lua.LState) string) func(L *lua.LState) {
		return func(L *lua.LState) {
			if s, ok := L.Get(n).(lua.LString); ok {
				e.mustPath(L, op(L), string(s))
			}
		}
	}
	read := func(*lua.LState) string { return "read" }
	write := func(*lua.LState) string { return "write" }

	osT := L.GetGlobal("os").(*lua.LTable)
	osT.RawSetString("execute", refuse("os.execute", "it starts processes"))
	osT.RawSetString("tmpname", refuse("os.tmpname", "it names files outside the run"))
	osT.RawSetString("setenv", refuse("os.setenv", "it changes the environment of the engines"))
	wrap(osT, "remove", pathArg(1, write))
	wrap(osT, "rename", func(L *lua.LState) { pathArg(1, write)(L); pathArg(2, write)(L) })
	wrap(osT, "getenv", func(L *lua.LState) {
		if name := L.CheckString(1); !slices.Contains(envAllowed, name) {
			L.RaiseError("os.getenv(%q) is not available to a confined recipe (it may read %s); %s", name, strings.Join(envAllowed, ", "), ErrConfined.Error())
		}
	})

	ioT := L.GetGlobal("io").(*lua.LTable)
	ioT.RawSetString("popen", refuse("io.popen", "it starts processes"))
	ioT.RawSetString("tmpfile", refuse("io.tmpfile", "it writes outside the run"))
	wrap(ioT, "open", pathArg(1, func(L *lua.LState) string {
		if mode := L.OptString(2, "r"); strings.Trim(mode, "b") == "r" {
			return "read"
		}
		return "write"
	}))
	wrap(ioT, "lines", pathArg(1, read))
	wrap(ioT, "input", pathArg(1, read))
	wrap(ioT, "output", pathArg(1, write))

	pkg := L.GetGlobal("package").(*lua.LTable)
	pkg.RawSetString("loadlib", refuse("package.loadlib", "it loads native code"))
	L.GetGlobal("string").(*lua.LTable).RawSetString("dump", refuse("string.dump", "bytecode"))
	for _, name := range []string{"dofile", "loadfile"} {
		wrap(L.G.Global, name, pathArg(1, read))
	}
	for _, name := range []string{"load", "loadstring"} {
		wrap(L.G.Global, name, func(L *lua.LState) {
			if s, ok := L.Get(1).(lua.LString); ok && strings.HasPrefix(string(s), "\x1b") {
				L.RaiseError("%s of a binary chunk is not available to a confined recipe (bytecode); %s", name, ErrConfined.Error())
			}
		})
	}
	// The debug library reaches upvalues, locals, registries and metatables of anything:
	// only its traceback stays.
	if dbg, ok := L.GetGlobal("debug").(*lua.LTable); ok {
		traceback := dbg.RawGetString("traceback")
		var keys []lua.LValue
		dbg.ForEach(func(k, _ lua.LValue) { keys = append(keys, k) })
		for _, k := range keys {
			dbg.RawSet(k, lua.LNil)
		}
		dbg.RawSetString("traceback", traceback)
	}
}
