package luabind

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// rook.exec(path, overrides) runs another recipe in a fresh Lua state, with the overrides
// as its key=value config arguments (numbers, strings, booleans, lists; a table of named
// values as dotted keys, stockfish = {depth = 4} as stockfish.depth=4), and returns what
// the recipe returns, and, when a run's recovery policy stopped it, the stop report as a
// second value. A relative path is looked up from the working directory, then from the
// calling recipe's directory. Scripted ablations are this call in a loop. A failed last save
// or an interrupt in the recipe raises an error here.
func (e *Env) luaExec(L *lua.LState) int {
	path := L.CheckString(1)
	o := L.OptTable(2, nil)
	if _, err := os.Stat(path); err != nil && !filepath.IsAbs(path) && e.opts.Recipe != "" {
		if alt := filepath.Join(filepath.Dir(e.opts.Recipe), path); fileExists(alt) {
			path = alt
		}
	}
	var args []string
	var flatten func(prefix string, t *lua.LTable)
	flatten = func(prefix string, t *lua.LTable) {
		var keys []string
		t.ForEach(func(k, _ lua.LValue) { keys = append(keys, k.String()) })
		sort.Strings(keys)
		for _, k := range keys {
			v := t.RawGetString(k)
			if sub, ok := v.(*lua.LTable); ok && sub.Len() == 0 && hasKeys(sub) {
				flatten(prefix+k+".", sub) // a table of named values: a section's settings, dotted
				continue
			}
			s, err := overrideText(v)
			if err != nil {
				L.ArgError(2, fmt.Sprintf("override %s: %v", prefix+k, err))
			}
			args = append(args, prefix+k+"="+s)
		}
	}
	if o != nil {
		flatten("", o)
	}
	e.mustPath(L, "read", path)
	child, err := New(Options{Args: args, Recipe: path, Stdout: e.out, Quiet: e.opts.Quiet, Modules: e.opts.Modules, Trust: e.opts.Trust})
	if err != nil {
		L.RaiseError("rook.exec %s: %s", path, err.Error())
	}
	if e.access != nil {
		child.access = e.access.clone() // the caller's arguments name paths, not the child's
	}
	defer child.Close()
	child.intr = e.intr // an interrupt reaches the run the child opens
	v, err := child.runReturning(L, path)
	var stopped *StoppedError
	if errors.As(err, &stopped) {
		L.Push(fromGo(L, v))
		L.Push(lua.LString(stopped.Reason))
		return 2
	}
	if err != nil {
		L.RaiseError("rook.exec %s: %s", path, err.Error())
	}
	L.Push(fromGo(L, v))
	return 1
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// runReturning runs a recipe under the caller's context and returns its value as Go data.
func (e *Env) runReturning(caller *lua.LState, path string) (any, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fn, err := e.L.Load(strings.NewReader(string(src)), path)
	if err != nil {
		return nil, &RecipeError{Message: syntaxMessage(string(src), path, err)}
	}
	e.L.SetContext(caller.Context())
	e.L.Push(fn)
	if err := e.pcall(0, 1); err != nil {
		return nil, e.outcome(err)
	}
	ret := e.L.Get(-1)
	e.L.Pop(1)
	v, err := toGo(ret)
	if err != nil {
		return nil, err
	}
	return v, e.outcome(nil)
}

// overrideText writes a Lua value the way a key=value argument spells it.
func overrideText(v lua.LValue) (string, error) {
	switch x := v.(type) {
	case lua.LNumber:
		return strconv.FormatFloat(float64(x), 'g', -1, 64), nil
	case lua.LString:
		return string(x), nil
	case lua.LBool:
		return strconv.FormatBool(bool(x)), nil
	case *lua.LTable:
		var parts []string
		for i := 1; i <= x.Len(); i++ {
			s, err := overrideText(x.RawGetInt(i))
			if err != nil {
				return "", err
			}
			if _, isStr := x.RawGetInt(i).(lua.LString); isStr {
				s = strconv.Quote(s)
			}
			parts = append(parts, s)
		}
		return "[" + strings.Join(parts, ", ") + "]", nil
	}
	return "", fmt.Errorf("a %s cannot be a config value", v.Type())
}

// rook.cache_dir() → where built artefacts (the default model) are kept:
// $ROOKSCRIPT_CACHE, else the user cache directory's rookscript/.
func luaCacheDir(L *lua.LState) int {
	L.Push(lua.LString(cacheDir()))
	return 1
}

// cacheDir is where built artefacts are kept.
func cacheDir() string {
	if dir := os.Getenv("ROOKSCRIPT_CACHE"); dir != "" {
		return dir
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = ".cache"
	}
	return filepath.Join(base, "rookscript")
}

// rook.exists(path) → whether a file or directory exists (a confined recipe: where it may
// read).
func (e *Env) luaExists(L *lua.LState) int {
	path := L.CheckString(1)
	e.mustPath(L, "read", path)
	L.Push(lua.LBool(fileExists(path)))
	return 1
}

func hasKeys(t *lua.LTable) bool {
	k, _ := t.Next(lua.LNil)
	return k != lua.LNil
}
