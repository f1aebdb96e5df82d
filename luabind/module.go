package luabind

import (
	"fmt"
	"io/fs"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/scripts"
)

// loader builds module rook.
func (e *Env) loader(L *lua.LState) int {
	mod := L.NewTable()
	L.SetFuncs(mod, map[string]lua.LGFunction{
		"config":    e.luaConfig,
		"load":      e.luaLoad,
		"adamw":     e.luaAdamW,
		"encode":    luaEncode,
		"decode":    luaDecode,
		"log":       e.luaLog,
		"clock":     luaClock,
		"run":       e.luaRun,
		"run_state": e.luaRunState,
		"exec":      e.luaExec,
		"cache_dir": luaCacheDir,
		"exists":    e.luaExists,
		"progress":  e.luaProgress,
		"gradcheck": e.luaGradcheck,
	})
	mod.RawSetString("eot", lua.LNumber(50256))
	mod.RawSetString("world", e.worldTable(L))
	grpo := L.NewTable()
	L.SetFuncs(grpo, map[string]lua.LGFunction{"step": e.luaGRPOStep, "defaults": luaGRPODefaults, "plan": luaGRPOPlan, "apply_plan": e.luaGRPOApplyPlan,
		"advantages": e.luaGRPOAdvantages, "signal": e.luaGRPOSignal})
	mod.RawSetString("grpo", grpo)
	batchMod := L.NewTable()
	L.SetFuncs(batchMod, map[string]lua.LGFunction{"join": e.luaBatchJoin})
	mod.RawSetString("batch", batchMod)
	debug := L.NewTable()
	L.SetFuncs(debug, map[string]lua.LGFunction{"inject_nan": luaInjectNaN, "kill": luaKill})
	mod.RawSetString("debug", debug)
	sftMod := L.NewTable()
	L.SetFuncs(sftMod, map[string]lua.LGFunction{"step": luaSFTStep, "loss": luaSFTLoss, "plan": luaSFTPlan})
	mod.RawSetString("sft", sftMod)
	reward := L.NewTable()
	L.SetFuncs(reward, map[string]lua.LGFunction{"fn": e.luaRewardFn})
	mod.RawSetString("reward", reward)
	mod.RawSetString("memory", memoryModule(L))
	e.registerTypes(L)
	e.registerChess(L, mod, reward)
	e.guard.guardModule(mod, true, map[*lua.LTable]bool{})
	e.guardTypes(L)
	e.lockTypes(L)
	L.Push(mod)
	return 1
}

func (e *Env) registerTypes(L *lua.LState) {
	registerType(L, modelType, e.modelMethods(), modelIndex)
	registerType(L, batchType, batchMethods, batchIndex)
	L.GetTypeMetatable(batchType).(*lua.LTable).RawSetString("__len", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LNumber(len(checkBatch(L, 1).b.Completions)))
		return 1
	}))
	registerType(L, adamType, e.adamMethods(), nil)
	registerType(L, runType, runMethods, runIndex)
	registerType(L, progressType, progressMethods, nil)
	registerType(L, configErrorType, nil, nil)
}

// registerType creates the metatable of a userdata type: methods by name, plus an optional
// index function for fields (tried after the methods), __tostring from the Go value.
func registerType(L *lua.LState, name string, methods map[string]lua.LGFunction, fields lua.LGFunction) {
	mt := L.NewTypeMetatable(name)
	mt.RawSetString("__name", lua.LString(name))
	mtab := L.SetFuncs(L.NewTable(), methods)
	L.G.Registry.RawSetString(methodsKey+name, mtab) // for guardTypes
	if fields == nil {
		mt.RawSetString("__index", mtab)
	} else {
		mt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
			if m := mtab.RawGet(L.Get(2)); m != lua.LNil {
				L.Push(m)
				return 1
			}
			return fields(L)
		}))
	}
	mt.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		ud := L.CheckUserData(1)
		if s, ok := ud.Value.(fmt.Stringer); ok {
			L.Push(lua.LString(s.String()))
		} else {
			L.Push(lua.LString(name))
		}
		return 1
	}))
	// Method names for the REPL's tab completion.
	names := L.NewTable()
	for k := range methods {
		names.Append(lua.LString(k))
	}
	mt.RawSetString("__methods", names)
}

// methodsKey prefixes, in the registry, the table of a type's methods.
const methodsKey = "rookscript.methods."

// guardTypes makes the methods of every registered type engine calls (limits.go).
func (e *Env) guardTypes(L *lua.LState) {
	seen := map[*lua.LTable]bool{}
	L.G.Registry.ForEach(func(k, v lua.LValue) {
		if t, ok := v.(*lua.LTable); ok && strings.HasPrefix(k.String(), methodsKey) {
			e.guard.guardModule(t, false, seen)
		}
	})
}

// newUserData wraps v in a userdata of the named type.
func newUserData(L *lua.LState, typ string, v any) *lua.LUserData {
	ud := L.NewUserData()
	ud.Value = v
	L.SetMetatable(ud, L.GetTypeMetatable(typ))
	return ud
}

// check returns argument n as a userdata of the given type, or raises an argument error.
func check[T any](L *lua.LState, n int, typ string) T {
	ud, ok := L.Get(n).(*lua.LUserData)
	if ok {
		if v, ok := ud.Value.(T); ok {
			return v
		}
	}
	L.ArgError(n, typ+" expected, got "+describe(L.Get(n)))
	var zero T
	return zero
}

func describe(v lua.LValue) string {
	if ud, ok := v.(*lua.LUserData); ok {
		if mt, ok := ud.Metatable.(*lua.LTable); ok {
			if n, ok := mt.RawGetString("__name").(lua.LString); ok {
				return string(n)
			}
		}
	}
	return v.Type().String()
}

// pushErr returns the Lua convention for an expected failure: nil, message.
func pushErr(L *lua.LState, err error) int {
	L.Push(lua.LNil)
	L.Push(lua.LString(err.Error()))
	return 2
}

// embeddedLoader finds `require`d modules among the scripts embedded in the binary. For a
// confined recipe a module runs with its own globals (freeze.go).
func (e *Env) embeddedLoader(L *lua.LState) int {
	name := L.CheckString(1)
	src, err := fs.ReadFile(scripts.FS, strings.ReplaceAll(name, ".", "/")+".lua")
	if err != nil {
		L.Push(lua.LString(fmt.Sprintf("\n\tno embedded module '%s'", name)))
		return 1
	}
	fn, err := L.Load(strings.NewReader(string(src)), "scripts/"+name+".lua")
	if err != nil {
		L.RaiseError("%s", syntaxMessage(string(src), "scripts/"+name+".lua", err))
	}
	if e.moduleEnv != nil {
		fn.Env = e.moduleEnv
	}
	L.Push(fn)
	return 1
}

// rook.log(fmt, ...) prints a timestamped line unless the run is quiet.
func (e *Env) luaLog(L *lua.LState) int {
	if e.opts.Quiet {
		return 0
	}
	msg := luaFormat(L, 1)
	e.say(time.Now().Format("15:04:05") + " " + msg)
	return 0
}

// luaFormat applies string.format to the arguments from n on (a plain string if only one).
func luaFormat(L *lua.LState, n int) string {
	if L.GetTop() == n {
		return L.ToStringMeta(L.Get(n)).String()
	}
	format := L.GetField(L.GetGlobal("string"), "format")
	args := []lua.LValue{}
	for i := n; i <= L.GetTop(); i++ {
		args = append(args, L.Get(i))
	}
	if err := L.CallByParam(lua.P{Fn: format, NRet: 1, Protect: false}, args...); err != nil {
		L.RaiseError("%s", err.Error())
	}
	s := L.Get(-1).String()
	L.Pop(1)
	return s
}

var start = time.Now()

// rook.clock() is seconds since the process started (for timing in recipes).
func luaClock(L *lua.LState) int {
	L.Push(lua.LNumber(time.Since(start).Seconds()))
	return 1
}
