package luabind

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/scripts"
)

// Where `require` looks, in order:
//
//  1. package.preload (module rook, and Options.Modules);
//  2. the scripts/ directory beside the recipe (in the REPL: ./scripts/), for a recipe's
//     own modules and for local edits of the embedded ones — an override is logged;
//  3. the modules embedded in the binary (scripts/*.lua).
//
// Nothing else: not the working directory, not LUA_PATH. A recipe given by an absolute path
// gets the same modules wherever it is run from, and a stray schedules.lua in the working
// directory cannot replace the embedded one.

// moduleDir is the directory searched before the embedded modules.
func (e *Env) moduleDir() string {
	if e.opts.Recipe == "" {
		return "scripts"
	}
	return filepath.Join(filepath.Dir(e.opts.Recipe), "scripts")
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
	loaders.Append(L.NewFunction(embeddedLoader))
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
	path := modulePath(e.moduleDir(), name)
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
	if isEmbedded(name) && !e.opts.Quiet {
		e.say(fmt.Sprintf("module %s: using %s instead of the embedded one", name, path))
	}
	L.Push(fn)
	return 1
}

// isEmbedded reports whether the binary carries a module of that name.
func isEmbedded(name string) bool {
	_, err := fs.Stat(scripts.FS, strings.ReplaceAll(name, ".", "/")+".lua")
	return err == nil
}
