package luabind

import (
	"fmt"
	"io/fs"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/scripts"
)

// A confined recipe shares one Lua state with the embedded modules it requires, and some of
// its tables with them: strings' metatable, module rook, the modules' own tables. Changed by
// the recipe, they would change what evalkit reports or what the recovery policy decides. So
// a confined recipe sees them through read-only views, as Luau's scripts see theirs: an
// empty table whose metatable reads through to the real one (views of the tables under it
// included) and refuses every write. pairs, ipairs, next, rawget, unpack and table.concat
// read through a view; rawset and table.insert, remove and sort refuse one. The embedded
// modules run with a copy of the globals as they were before the recipe ran, so a recipe
// that replaces a global (math, pairs, require) changes it for itself only.

// frozenKey is the raw field of a view's metatable holding the table it shows: Go reads it,
// Lua cannot (getmetatable returns the protected __metatable instead).
const frozenKey = "__frozen"

// realTable is the table a read-only view shows, or t itself.
func realTable(t *lua.LTable) *lua.LTable {
	if mt, ok := t.Metatable.(*lua.LTable); ok {
		if r, ok := mt.RawGetString(frozenKey).(*lua.LTable); ok {
			return r
		}
	}
	return t
}

// realValue is v with a read-only view replaced by the table it shows.
func realValue(v lua.LValue) lua.LValue {
	if t, ok := v.(*lua.LTable); ok {
		return realTable(t)
	}
	return v
}

// view returns the read-only view of t named name (memoized per table).
func (e *Env) view(t *lua.LTable, name string) *lua.LTable {
	if realTable(t) != t {
		return t // a view already
	}
	if e.frozen == nil {
		e.frozen = map[*lua.LTable]*lua.LTable{}
	}
	if v, ok := e.frozen[t]; ok {
		return v
	}
	L := e.L
	mt := L.NewTable()
	mt.RawSetString(frozenKey, t)
	nested := false
	t.ForEach(func(_, v lua.LValue) {
		if sub, ok := v.(*lua.LTable); ok && realTable(sub) == sub {
			nested = true
		}
	})
	if nested {
		mt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
			k := L.Get(2)
			v := t.RawGet(k)
			if sub, ok := v.(*lua.LTable); ok {
				v = e.view(sub, name+"."+lua.LVAsString(k))
			}
			L.Push(v)
			return 1
		}))
	} else {
		// No table to hand out: the VM reads t itself, as fast as a global. (Lua cannot reach
		// t: the metatable is protected, and rawget reads through.)
		mt.RawSetString("__index", t)
	}
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("%s is read-only in a confined recipe (the embedded modules share it): copy it to change it", name)
		return 0
	}))
	mt.RawSetString("__len", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LNumber(t.Len()))
		return 1
	}))
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LString(fmt.Sprintf("%s (read-only)", name)))
		return 1
	}))
	mt.RawSetString("__metatable", lua.LString(name+" is read-only"))
	v := L.NewTable()
	v.Metatable = mt
	e.frozen[t] = v
	return v
}

// freezeShared makes the shared tables read-only views and gives the embedded modules their
// own globals (confine calls it last).
func (e *Env) freezeShared() {
	L := e.L
	G := L.G.Global
	override := func(t *lua.LTable, name string, f func(orig *lua.LFunction) lua.LGFunction) {
		orig := t.RawGetString(name).(*lua.LFunction)
		t.RawSetString(name, L.NewFunction(f(orig)))
	}
	// call runs orig with the arguments, views replaced by their tables.
	call := func(L *lua.LState, orig *lua.LFunction) int {
		top := L.GetTop()
		L.Push(orig)
		for i := 1; i <= top; i++ {
			L.Push(realValue(L.Get(i)))
		}
		L.Call(top, lua.MultRet)
		return L.GetTop() - top
	}
	through := func(orig *lua.LFunction) lua.LGFunction {
		return func(L *lua.LState) int { return call(L, orig) }
	}
	refuseView := func(name string) func(orig *lua.LFunction) lua.LGFunction {
		return func(orig *lua.LFunction) lua.LGFunction {
			return func(L *lua.LState) int {
				if t, ok := L.Get(1).(*lua.LTable); ok && realTable(t) != t {
					L.RaiseError("%s: %s", name, lua.LVAsString(t.Metatable.(*lua.LTable).RawGetString("__metatable")))
				}
				return call(L, orig)
			}
		}
	}
	e.overrideReaders(G)
	override(G, "rawset", refuseView("rawset"))
	tableT := G.RawGetString("table").(*lua.LTable)
	for _, name := range []string{"concat", "maxn"} {
		if _, ok := tableT.RawGetString(name).(*lua.LFunction); ok {
			override(tableT, name, through)
		}
	}
	for _, name := range []string{"insert", "remove", "sort"} {
		override(tableT, name, refuseView("table."+name))
	}
	// A function of an embedded module keeps its globals.
	override(G, "setfenv", func(orig *lua.LFunction) lua.LGFunction {
		return func(L *lua.LState) int {
			if f, ok := L.Get(1).(*lua.LFunction); ok && f.Env != nil && realTable(f.Env) != f.Env {
				L.RaiseError("setfenv: the function's globals are an embedded module's, which a confined recipe cannot replace")
			}
			return call(L, orig)
		}
	})
	// require returns the embedded modules and module rook as views.
	override(G, "require", func(orig *lua.LFunction) lua.LGFunction {
		return func(L *lua.LState) int {
			name := L.CheckString(1)
			n := call(L, orig)
			if t, ok := L.Get(-1).(*lua.LTable); ok && n == 1 && (name == "rook" || isEmbedded(name)) {
				L.Replace(-1, e.view(t, name))
			}
			return n
		}
	})
	// Strings' metatable: read through getmetatable(""), never replaced.
	strT := G.RawGetString("string").(*lua.LTable)
	G.RawSetString("string", e.view(strT, "string"))
	if mt, ok := L.GetMetatable(lua.LString("")).(*lua.LTable); ok {
		mt.RawSetString("__metatable", e.view(mt, "string")) // gopher-lua's is the string table itself
	}
	// package.loaded holds the modules, package.preload their loaders.
	G.RawSetString("package", e.view(G.RawGetString("package").(*lua.LTable), "package"))
	// The embedded modules' globals: a read-only copy of these, with copies of the library
	// tables a recipe may still change for itself.
	env := L.NewTable()
	G.ForEach(func(k, v lua.LValue) { env.RawSet(k, v) })
	for _, name := range []string{"table", "math", "os", "io", "coroutine"} {
		if t, ok := env.RawGetString(name).(*lua.LTable); ok {
			c := L.NewTable()
			t.ForEach(func(k, v lua.LValue) { c.RawSet(k, v) })
			env.RawSetString(name, e.view(c, name))
		}
	}
	e.moduleEnv = e.view(env, "an embedded module's globals")
	env.RawSetString("_G", e.moduleEnv)
}

// overrideReaders makes pairs, ipairs, next, rawget and unpack read through a view, with the
// tables they return as views too.
func (e *Env) overrideReaders(G *lua.LTable) {
	L := e.L
	// shown is what a reader of view v returns for value x under key k.
	shown := func(v *lua.LTable, k, x lua.LValue) lua.LValue {
		if t, ok := x.(*lua.LTable); ok {
			name := lua.LVAsString(v.Metatable.(*lua.LTable).RawGetString("__metatable"))
			return e.view(t, strings.TrimSuffix(name, " is read-only")+"."+lua.LVAsString(k))
		}
		return x
	}
	// asView is argument 1 as a view, or nil.
	asView := func(L *lua.LState) (*lua.LTable, *lua.LTable) {
		if t, ok := L.Get(1).(*lua.LTable); ok {
			if r := realTable(t); r != t {
				return t, r
			}
		}
		return nil, nil
	}
	orig := func(name string) *lua.LFunction { return G.RawGetString(name).(*lua.LFunction) }
	next, pairs, ipairs, rawget, unpack := orig("next"), orig("pairs"), orig("ipairs"), orig("rawget"), orig("unpack")
	fallback := func(L *lua.LState, f *lua.LFunction) int {
		top := L.GetTop()
		L.Push(f)
		for i := 1; i <= top; i++ {
			L.Push(L.Get(i))
		}
		L.Call(top, lua.MultRet)
		return L.GetTop() - top
	}
	viewNext := L.NewFunction(func(L *lua.LState) int {
		v, r := asView(L)
		if v == nil {
			return fallback(L, next)
		}
		k, x := r.Next(L.Get(2))
		if k == lua.LNil {
			L.Push(lua.LNil)
			return 1
		}
		L.Push(k)
		L.Push(shown(v, k, x))
		return 2
	})
	viewINext := L.NewFunction(func(L *lua.LState) int {
		v, r := asView(L)
		if v == nil {
			return 0
		}
		i := L.CheckInt(2) + 1
		x := r.RawGetInt(i)
		if x == lua.LNil {
			return 0
		}
		L.Push(lua.LNumber(i))
		L.Push(shown(v, lua.LNumber(i), x))
		return 2
	})
	G.RawSetString("next", viewNext)
	G.RawSetString("pairs", L.NewFunction(func(L *lua.LState) int {
		if v, _ := asView(L); v != nil {
			L.Push(viewNext)
			L.Push(v)
			L.Push(lua.LNil)
			return 3
		}
		return fallback(L, pairs)
	}))
	G.RawSetString("ipairs", L.NewFunction(func(L *lua.LState) int {
		if v, _ := asView(L); v != nil {
			L.Push(viewINext)
			L.Push(v)
			L.Push(lua.LNumber(0))
			return 3
		}
		return fallback(L, ipairs)
	}))
	G.RawSetString("rawget", L.NewFunction(func(L *lua.LState) int {
		if v, r := asView(L); v != nil {
			L.Push(shown(v, L.Get(2), r.RawGet(L.Get(2))))
			return 1
		}
		return fallback(L, rawget)
	}))
	G.RawSetString("unpack", L.NewFunction(func(L *lua.LState) int {
		if v, r := asView(L); v != nil {
			n := r.Len()
			for i := 1; i <= n; i++ {
				L.Push(shown(v, lua.LNumber(i), r.RawGetInt(i)))
			}
			return n
		}
		return fallback(L, unpack)
	}))
}

// preload sets the loader of module name, as LState.PreloadModule does, also once package
// is a confined recipe's read-only view.
func (e *Env) preload(name string, loader lua.LGFunction) {
	pkg := realTable(e.L.GetGlobal("package").(*lua.LTable))
	pkg.RawGetString("preload").(*lua.LTable).RawSetString(name, e.L.NewFunction(loader))
}

// lockTypes protects the metatables of module rook's types, so that a confined recipe cannot
// change the methods the embedded modules call (the loader calls it).
func (e *Env) lockTypes(L *lua.LState) {
	if e.access == nil {
		return
	}
	L.G.Registry.ForEach(func(k, _ lua.LValue) {
		if name, ok := strings.CutPrefix(k.String(), methodsKey); ok {
			if mt, ok := L.GetTypeMetatable(name).(*lua.LTable); ok {
				mt.RawSetString("__metatable", e.view(mt, name+"'s metatable"))
			}
		}
	})
}

// isEmbedded reports whether the binary carries a module of that name.
func isEmbedded(name string) bool {
	_, err := fs.Stat(scripts.FS, strings.ReplaceAll(name, ".", "/")+".lua")
	return err == nil
}
