package luabind

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/checkpoint"
)

// A recipe is code someone may have sent, so it runs confined unless the user trusts it
// (--trust; the REPL, where the user types). Confined, it cannot start processes, load native
// code or bytecode, or reach the debug library's ways out; it reads only its own folder, the
// cache and the paths the user named on the command line, and it writes only inside its run
// directory (or a file the command line named for writing: out=, cache_file=). docs/SECURITY.md
// is the threat model.
//
// One rule grants every write (grantWrite): a run directory is new, or one of rookscript's
// runs; never the working directory or a folder above it, $HOME or a folder above it, a
// dot-folder, the cache, or a folder holding files rookscript did not write. A path-valued
// setting is checked before anything is granted, so a refused one grants nothing, even under
// pcall. Every file function checks its path whatever type the argument has, and no write
// may create a .lua file: what a confined recipe writes is never loaded as code by a later
// run. The standard library tables are changed in place, so no path through getfenv, a
// string's metatable or package.loaded leads back to what was removed. The tables a recipe
// shares with the embedded modules (strings' metatable, module rook, the modules require
// returns) are read-only views, as Luau's are, and the embedded modules see their own copy
// of the globals. As Redis' EVAL and Neovim's secure mode do, the confinement removes the
// ways out rather than trying to inspect what a script does with them.

// pathKeys are the command-line keys whose values name paths the user gives the recipe to
// read (a dotted key by its last part: pass.model).
var pathKeys = []string{"data", "model", "resume", "out", "run_dir", "config", "positions", "base_dir", "path", "cache_file"}

// writeKeys are the path keys the recipe may also write, and what each names.
var writeKeys = map[string]grantKind{"run_dir": grantRun, "resume": grantRun, "base_dir": grantRuns, "out": grantModel, "cache_file": grantFile}

// envAllowed are the environment variables a confined recipe may read.
var envAllowed = []string{"ROOKSCRIPT_CACHE", "LANG", "TERM", "TZ"}

// grantKind is what a write grant is for: what may already be there decides whether it is
// the recipe's to write.
type grantKind int

const (
	grantRun   grantKind = iota // a run directory: new, empty, or a run's
	grantRuns                   // a folder of runs (an ablation's base_dir): new, or holding only runs
	grantModel                  // a model folder (model:save): new, empty, or a saved model's
	grantFile                   // one file (a Stockfish cache): new, or a file
)

// access is what a confined recipe may touch: absolute, symlink-resolved roots.
type access struct {
	read, write []string
	named       []string // paths named on the command line, as given: a Stockfish binary among them
}

func (a *access) clone() *access {
	return &access{read: slices.Clone(a.read), write: slices.Clone(a.write), named: slices.Clone(a.named)}
}

// newAccess is the access of a recipe run with args: its folder and the cache to read, the
// paths the arguments name to read, and those named for writing (writeKeys) to write once
// grantWrite accepts them; a refused one is an error naming its key.
func newAccess(recipe string, args []override) (*access, error) {
	a := &access{}
	if recipe != "" {
		a.read = append(a.read, realPath(filepath.Dir(recipe)))
	}
	a.read = append(a.read, realPath(cacheDir()))
	for _, o := range args {
		parts := strings.Split(o.key, ".")
		key := parts[len(parts)-1]
		if !slices.Contains(pathKeys, key) || o.raw == "" {
			continue
		}
		p := realPath(o.raw)
		a.read, a.named = append(a.read, p), append(a.named, o.raw)
		if kind, ok := writeKeys[key]; ok {
			err := grantWrite(o.raw, kind)
			switch {
			case err == nil:
				a.write = append(a.write, p)
			case key != "resume": // a resume of what is not a run says so where it resumes
				return nil, fmt.Errorf("%s=%s: %w", o.key, o.raw, err)
			}
		}
	}
	return a, nil
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

// withinNoDot reports whether p lies under one of roots with no folder or file below the root
// named with a dot: a recipe's folder or run directory may hold .git or .ssh, which are not
// the recipe's to read or write.
func withinNoDot(p string, roots []string) bool {
	for _, r := range roots {
		if !within(p, []string{r}) {
			continue
		}
		rel, err := filepath.Rel(r, p)
		if err != nil {
			continue
		}
		dot := false
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			if strings.HasPrefix(part, ".") && part != "." {
				dot = true
			}
		}
		if !dot {
			return true
		}
	}
	return false
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

// isLua reports whether a write of path would leave a Lua file: a later run could load it.
func isLua(path string) bool { return strings.EqualFold(filepath.Ext(path), ".lua") }

// grantWrite is the one rule for a folder or file a confined recipe may write: nil, or why not.
func grantWrite(path string, kind grantKind) error {
	p := realPath(path)
	cwd, _ := os.Getwd()
	home, _ := os.UserHomeDir()
	for _, d := range []struct{ dir, name string }{{cwd, "the working directory"}, {home, "the home directory"}} {
		if d.dir == "" {
			continue
		}
		if r := realPath(d.dir); r == p || within(r, []string{p}) {
			return fmt.Errorf("%s is %s or a folder above it", path, d.name)
		}
	}
	cache := realPath(cacheDir())
	if within(p, []string{cache}) || within(cache, []string{p}) {
		return fmt.Errorf("%s holds or is inside the cache %s, which the default model is built in", path, cacheDir())
	}
	if dot := dotComponent(p, cwd, home); dot != "" {
		return fmt.Errorf("%s is, or is inside, the dot-file or dot-folder %s (configuration, keys, a repository)", path, dot)
	}
	if isLua(p) {
		return fmt.Errorf("%s is a Lua file, which a later run could load as code", path)
	}
	fi, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if kind == grantFile {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a file", path)
		}
		return nil
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", path)
	}
	entries, err := os.ReadDir(p)
	if err != nil || len(entries) == 0 {
		return err
	}
	switch kind {
	case grantRun:
		if !checkpoint.IsRun(p) {
			return fmt.Errorf("%s holds files rookscript did not write (it is not a run: no checkpoints/, metrics.jsonl or lock)", path)
		}
	case grantRuns:
		for _, en := range entries {
			if sub := filepath.Join(p, en.Name()); !en.IsDir() || !checkpoint.IsRun(sub) && !isEmptyDir(sub) {
				return fmt.Errorf("%s holds %s, which is not a run", path, en.Name())
			}
		}
	case grantModel:
		for _, en := range entries {
			if en.Name() != "config.json" && en.Name() != "model.safetensors" {
				return fmt.Errorf("%s holds %s, which is not a saved model's", path, en.Name())
			}
		}
	}
	return nil
}

// dotComponent is the first folder of p, below the working or home directory that holds it
// (else below /), whose name starts with a dot; "" if none.
func dotComponent(p, cwd, home string) string {
	base := string(filepath.Separator)
	for _, d := range []string{cwd, home} {
		if d != "" {
			if r := realPath(d); within(p, []string{r}) && len(r) > len(base) {
				base = r
			}
		}
	}
	rel, err := filepath.Rel(base, p)
	if err != nil {
		return ""
	}
	at := base
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		at = filepath.Join(at, part)
		if strings.HasPrefix(part, ".") && part != "." && part != ".." {
			return at
		}
	}
	return ""
}

func isEmptyDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) == 0
}

// checkPath refuses path for a confined recipe unless it lies under a root for op ("read"
// or "write"); a write never leaves a Lua file. A trusted recipe may use any path.
func (e *Env) checkPath(op, path string) error {
	a := e.access
	if a == nil {
		return nil
	}
	p := realPath(path)
	if op == "write" && isLua(p) {
		return fmt.Errorf("a confined recipe cannot write the Lua file %s (a later run could load it as code); %w", path, ErrConfined)
	}
	roots := a.read
	if op == "write" {
		roots = a.write
	}
	if withinNoDot(p, roots) || op == "read" && withinNoDot(p, a.write) {
		return nil
	}
	where := "its run directory and the paths named for writing on the command line (out=, cache_file=), never a dot-file"
	if op == "read" {
		where = "the recipe's folder, the cache, its run directory and the paths named on the command line, never a dot-file"
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

// runDirGrant checks that a confined recipe may make dir its run directory (kind grantRun)
// or its folder of runs (grantRuns): one the command line named, a folder inside one it was
// granted, or a new folder (or a run) inside the working directory that grantWrite accepts.
// It grants nothing: commit, once every other check of the call has passed, does.
func (e *Env) runDirGrant(dir string, kind grantKind) (commit func(), err error) {
	nothing := func() {}
	if e.access == nil || dir == "" {
		return nothing, nil
	}
	p := realPath(dir)
	if withinNoDot(p, e.access.write) {
		if isLua(p) {
			return nil, fmt.Errorf("a run directory cannot be a Lua file's name (%s)", dir)
		}
		return nothing, nil
	}
	cwd, err := os.Getwd()
	if err != nil || !within(p, []string{realPath(cwd)}) {
		return nil, fmt.Errorf("a confined recipe's run directory is a new folder inside the working directory or a path named on the command line, not %s: give run_dir=PATH, or %w", dir, ErrConfined)
	}
	if err := grantWrite(dir, kind); err != nil {
		return nil, fmt.Errorf("a confined recipe cannot make %s its run directory: %w; give run_dir=PATH, or %w", dir, err, ErrConfined)
	}
	return func() { e.access.read, e.access.write = append(e.access.read, p), append(e.access.write, p) }, nil
}

// grantRunDirs checks a config's folder of runs and run directory, as rook.run would, and
// grants a confined recipe access to them only once every check has passed: a refused
// setting grants nothing, even to a recipe that catches the refusal.
func (e *Env) grantRunDirs(cfg map[string]any) error {
	var grants []func()
	if dir, _ := cfg["base_dir"].(string); dir != "" {
		grant, err := e.runDirGrant(dir, grantRuns)
		if err != nil {
			return &ConfigError{Key: "base_dir", Value: dir, Reason: err.Error()}
		}
		grants = append(grants, grant)
	}
	if dir, _ := cfg["run_dir"].(string); dir != "" {
		resume, _ := cfg["resume"].(string)
		if resume != "" {
			dir = resume
		}
		// A resume says first whether it names a run; a new run, whether it may be written.
		var err error
		if resume != "" {
			err = checkpoint.Preflight(dir, true)
		}
		grant, gerr := e.runDirGrant(dir, grantRun)
		if err == nil {
			err = gerr
		}
		if err == nil && resume == "" {
			err = checkpoint.Preflight(dir, false)
		}
		if err != nil {
			return &ConfigError{Key: "run_dir", Value: dir, Reason: err.Error()}
		}
		grants = append(grants, grant)
	}
	for _, grant := range grants {
		grant()
	}
	return nil
}

// pathString is a file function's path argument as the function itself reads it: a string,
// or a number (Lua converts it).
func pathString(v lua.LValue) (string, bool) {
	switch v.(type) {
	case lua.LString, lua.LNumber:
		return lua.LVAsString(v), true
	}
	return "", false
}

// osExit is os.exit: the recipe ends as after an error (the environment closes, a run's lock
// is released and its last checkpoint stays the one to resume), then the process exits with
// the code. Lua's own os.exit would end the process in the middle of whatever it was doing.
func (e *Env) osExit(L *lua.LState) int {
	code := 0
	switch v := L.Get(1).(type) {
	case lua.LNumber:
		code = int(v)
	case lua.LBool:
		if !v {
			code = 1
		}
	}
	e.guard.end(L, &ExitError{Code: code})
	return 0
}

// confine takes the ways out of the standard library, puts path checks on what stays, and
// makes the shared tables read-only.
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
			if s, ok := pathString(L.Get(n)); ok {
				e.mustPath(L, op(L), s)
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
	strT := L.GetGlobal("string").(*lua.LTable)
	strT.RawSetString("dump", refuse("string.dump", "bytecode"))
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
	// One call can allocate more than the machine has: such calls are checked before they
	// allocate (limits.go); growth one instruction at a time the watchdog sees.
	wrap(strT, "rep", func(L *lua.LState) {
		e.guard.checkAlloc(L, float64(len(lua.LVAsString(L.Get(1))))*float64(L.OptNumber(2, 0)))
	})
	wrap(strT, "gsub", func(L *lua.LState) {
		if repl, ok := L.Get(3).(lua.LString); ok {
			e.guard.checkAlloc(L, float64(len(lua.LVAsString(L.Get(1)))+1)*float64(len(repl)))
		}
	})
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
	e.freezeShared()
}
