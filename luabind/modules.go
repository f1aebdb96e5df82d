package luabind

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/checkpoint"
	"github.com/rookscript/rookscript/scripts"
)

// Where `require` looks, in order:
//
//  1. package.preload (module rook, and Options.Modules);
//  2. the scripts/ directory beside the recipe (in the REPL: ./scripts/), for a recipe's
//     own modules and, beside a recipe only, for local edits of the embedded ones: such an
//     override is a warning on stderr before the recipe starts (ShadowWarnings);
//  3. the modules embedded in the binary (scripts/*.lua).
//
// Nothing else: not the working directory, not LUA_PATH, never a run directory. A recipe
// given by an absolute path gets the same modules wherever it is run from, and a stray
// schedules.lua in the working directory cannot replace the embedded one in the REPL.

// moduleDir is the directory searched before the embedded modules; "" when there is none to
// search: the recipe lies in a run directory, whose files a confined recipe may have written.
func (e *Env) moduleDir() string {
	if e.opts.Recipe == "" {
		return "scripts"
	}
	dir := filepath.Dir(e.opts.Recipe)
	if checkpoint.IsRun(dir) {
		return ""
	}
	return filepath.Join(dir, "scripts")
}

// ShadowWarnings are the warnings for the modules of the recipe's scripts/ folder that
// replace embedded ones, for the caller to show before the recipe starts.
func (e *Env) ShadowWarnings() []string {
	dir := e.moduleDir()
	if dir == "" || e.opts.Recipe == "" {
		return nil
	}
	var out []string
	fs.WalkDir(scripts.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".lua") {
			return nil
		}
		if local := filepath.Join(dir, filepath.FromSlash(p)); fileExists(local) {
			name := strings.ReplaceAll(strings.TrimSuffix(p, ".lua"), "/", ".")
			out = append(out, fmt.Sprintf("warning: %s replaces the embedded module %s for this recipe", local, name))
		}
		return nil
	})
	return out
}

// installSearchers replaces package.path's file search with the two loaders above.
func (e *Env) installSearchers() {
	L := e.L
	pkg := L.GetGlobal("package").(*lua.LTable)
	pkg.RawSetString("path", lua.LString(""))
	pkg.RawSetString("cpath", lua.LString(""))
	// gopher-lua's loaders: [1] preload, [2] package.path. The file search is ours.
	loaders := pkg.RawGetString("loaders").(*lua.LTable)
	loaders.RawSetInt(2, L.NewFunction(e.fileLoader))
	loaders.Append(L.NewFunction(e.embeddedLoader))
}

// modulePath is the file name of a module under dir ("a.b" → dir/a/b.lua).
func modulePath(dir, name string) string {
	return filepath.Join(dir, filepath.FromSlash(strings.ReplaceAll(name, ".", "/"))+".lua")
}

// fileLoader finds a module in the recipe's scripts/ directory.
func (e *Env) fileLoader(L *lua.LState) int {
	name := L.CheckString(1)
	if strings.ContainsAny(name, `/\`) || strings.Contains(name, "..") || strings.HasPrefix(name, ".") {
		L.RaiseError("require %q: a module is named a.b.c (scripts/a/b/c.lua beside the recipe), not by a path", name)
	}
	dir := e.moduleDir()
	if dir == "" || e.opts.Recipe == "" && isEmbedded(name) {
		L.Push(lua.LString(fmt.Sprintf("\n\tno file for '%s' beside the recipe", name)))
		return 1
	}
	path := modulePath(dir, name)
	src, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		L.Push(lua.LString(fmt.Sprintf("\n\tno file '%s'", path)))
		return 1
	}
	if err != nil {
		L.RaiseError("module %s: %s", name, err.Error())
	}
	fn, err := L.Load(strings.NewReader(string(src)), path)
	if err != nil {
		L.RaiseError("%s", syntaxMessage(string(src), path, err))
	}
	L.Push(fn)
	return 1
}
