package luabind

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// execOptions are rook.exec's third argument.
type execOptions struct {
	// Check runs the recipe only until its rook.config has resolved and checked the config,
	// and returns that config (or nil, err): nothing is loaded, started or written.
	Check bool `json:"check"`
	// Catch returns nil, err when the recipe fails, instead of raising; an interrupt still
	// raises, so that a loop of recipes stops with it.
	Catch bool `json:"catch"`
}

// rook.exec(path [, overrides [, opts]]) runs another recipe in a fresh Lua state, with the
// overrides as its key=value config arguments (numbers, strings, booleans, lists; a table of
// named values as dotted keys, stockfish = {depth = 4} as stockfish.depth=4), and returns
// what the recipe returns, and, when a run's recovery policy stopped it, the stop report as
// a second value. A relative path is looked up from the working directory, then from the
// calling recipe's directory. Scripted ablations are this call in a loop. A failed last save
// or an interrupt in the recipe raises an error here; with opts.catch a failure returns
// nil, err instead (an interrupt still raises). With opts.check the recipe stops once its
// rook.config has resolved and checked the overrides: the resolved config (what a run records
// in config.json), or nil, err naming the key.
func (e *Env) luaExec(L *lua.LState) int {
	path := L.CheckString(1)
	o := L.OptTable(2, nil)
	var opts execOptions
	options(L, 3, "rook.exec", &opts)
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
	// A failure of the recipe: nil, err for a check or a catch, else an error here.
	fail := func(err error) int {
		if opts.Check || opts.Catch {
			return pushErr(L, err)
		}
		L.RaiseError("rook.exec %s: %s", path, err.Error())
		return 0
	}
	var inherit *access
	if e.access != nil {
		inherit = e.access.clone() // the caller's arguments name paths, not the child's
	}
	child, err := newEnv(Options{Args: args, Recipe: path, Stdout: e.out, Stderr: e.opts.Stderr, Quiet: e.opts.Quiet,
		Modules: e.opts.Modules, Trust: e.opts.Trust, LuaTimeLimit: e.opts.LuaTimeLimit, LuaMemory: e.opts.LuaMemory}, inherit)
	if err != nil {
		return fail(err)
	}
	defer child.Close()
	child.intr = e.intr // an interrupt reaches the run the child opens
	parent := L.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var chk *configCheck
	if opts.Check {
		chk = &configCheck{stop: cancel}
		child.preload("rook", child.checkLoader(chk))
	}
	v, err := child.runReturning(ctx, path)
	var stopped *StoppedError
	var interrupted *InterruptedError
	switch {
	case errors.As(err, &interrupted) || err != nil && parent.Err() != nil:
		L.RaiseError("rook.exec %s: %s", path, err.Error()) // the caller stops too
	case chk != nil && chk.config != nil:
		L.Push(fromGo(L, chk.config))
		return 1
	case chk != nil && chk.early != "":
		return fail(fmt.Errorf("%s calls %s before rook.config: there is no config to check", path, chk.early))
	case chk != nil && err == nil:
		return fail(fmt.Errorf("%s ended without calling rook.config: there is no config to check", path))
	case errors.As(err, &stopped):
		L.Push(fromGo(L, v))
		L.Push(lua.LString(stopped.Reason))
		return 2
	case err != nil:
		return fail(err)
	}
	L.Push(fromGo(L, v))
	return 1
}

// configCheck is what a recipe run by rook.exec's check reached: its resolved config, or the
// rook function it called first.
type configCheck struct {
	stop   context.CancelFunc // ends the recipe: every Lua instruction after it raises
	config map[string]any
	early  string
}

// checkLoader builds module rook for a recipe that rook.exec checks: rook.config resolves and
// checks the config, records it and ends the recipe; any other rook function called before
// it ends the recipe unrun. The end is the recipe's context cancelled, so a pcall around
// rook.config cannot go on to do work.
func (e *Env) checkLoader(chk *configCheck) lua.LGFunction {
	return func(L *lua.LState) int {
		e.loader(L)
		mod := L.Get(-1).(*lua.LTable)
		end := func(L *lua.LState) int {
			chk.stop()
			L.RaiseError("rook.exec: the check ends the recipe here")
			return 0
		}
		seen := map[*lua.LTable]bool{}
		var wrap func(t *lua.LTable, prefix string)
		wrap = func(t *lua.LTable, prefix string) {
			if seen[t] {
				return
			}
			seen[t] = true
			var keys []string
			t.ForEach(func(k, _ lua.LValue) { keys = append(keys, k.String()) })
			for _, k := range keys {
				name := prefix + k
				switch v := t.RawGetString(k).(type) {
				case *lua.LTable:
					wrap(v, name+".")
				case *lua.LFunction:
					t.RawSetString(k, L.NewFunction(func(L *lua.LState) int {
						chk.early = name
						return end(L)
					}))
				}
			}
		}
		wrap(mod, "rook.")
		mod.RawSetString("config", L.NewFunction(func(L *lua.LState) int {
			e.luaConfig(L) // a config error is raised from here, at the recipe's line
			chk.config = e.config
			return end(L)
		}))
		return 1
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// runReturning runs a recipe under ctx and returns its value as Go data.
func (e *Env) runReturning(ctx context.Context, path string) (any, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fn, err := e.L.Load(strings.NewReader(string(src)), path)
	if err != nil {
		return nil, &RecipeError{Message: syntaxMessage(string(src), path, err)}
	}
	e.L.Push(fn)
	if err := e.call(ctx, 0, 1); err != nil {
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
