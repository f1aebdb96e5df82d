package luabind

import (
	"fmt"
	"sort"

	lua "github.com/yuin/gopher-lua"
)

// toGo converts a Lua value to plain Go data: nil, bool, float64, string, []any (a table
// whose keys are exactly 1..n) or map[string]any (string keys). Functions, userdata and
// mixed or non-string keys are errors: what crosses into Go (checkpoint state, configs) must
// be data.
func toGo(v lua.LValue) (any, error) { return toGoDepth(v, 0) }

func toGoDepth(v lua.LValue, depth int) (any, error) {
	if depth > 64 {
		return nil, fmt.Errorf("table nested more than 64 levels (a cycle?)")
	}
	switch x := v.(type) {
	case *lua.LNilType:
		return nil, nil
	case lua.LBool:
		return bool(x), nil
	case lua.LNumber:
		return float64(x), nil
	case lua.LString:
		return string(x), nil
	case *lua.LTable:
		x = realTable(x)
		n := x.Len()
		count := 0
		var err error
		x.ForEach(func(lua.LValue, lua.LValue) { count++ })
		if n > 0 && count == n {
			out := make([]any, n)
			for i := 1; i <= n && err == nil; i++ {
				out[i-1], err = toGoDepth(x.RawGetInt(i), depth+1)
			}
			return out, err
		}
		out := map[string]any{}
		x.ForEach(func(k, val lua.LValue) {
			if err != nil {
				return
			}
			ks, ok := k.(lua.LString)
			if !ok {
				err = fmt.Errorf("table key %s is not a string", k.String())
				return
			}
			var g any
			if g, err = toGoDepth(val, depth+1); err == nil {
				out[string(ks)] = g
			}
		})
		return out, err
	}
	return nil, fmt.Errorf("a %s cannot be stored (only numbers, strings, booleans and tables)", v.Type())
}

// fromGo converts plain Go data (as toGo returns, plus ints, float32 and []string) to Lua.
func fromGo(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(x)
	case float64:
		return lua.LNumber(x)
	case float32:
		return lua.LNumber(x)
	case int:
		return lua.LNumber(x)
	case int64:
		return lua.LNumber(x)
	case uint64:
		return lua.LNumber(x)
	case string:
		return lua.LString(x)
	case []string:
		t := L.CreateTable(len(x), 0)
		for _, s := range x {
			t.Append(lua.LString(s))
		}
		return t
	case []float64:
		t := L.CreateTable(len(x), 0)
		for _, f := range x {
			t.Append(lua.LNumber(f))
		}
		return t
	case []any:
		t := L.CreateTable(len(x), 0)
		for _, e := range x {
			t.Append(fromGo(L, e))
		}
		return t
	case map[string]any:
		t := L.CreateTable(0, len(x))
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.RawSetString(k, fromGo(L, x[k]))
		}
		return t
	case map[string]float64:
		t := L.CreateTable(0, len(x))
		for k, f := range x {
			t.RawSetString(k, lua.LNumber(f))
		}
		return t
	}
	panic(fmt.Sprintf("luabind: cannot convert %T to Lua", v))
}

// numberList reads a Lua array of numbers.
func numberList(L *lua.LState, t *lua.LTable, what string) []float64 {
	n := t.Len()
	out := make([]float64, n)
	for i := 1; i <= n; i++ {
		v, ok := t.RawGetInt(i).(lua.LNumber)
		if !ok {
			L.RaiseError("%s: element %d is %s, want a number", what, i, t.RawGetInt(i).Type())
		}
		out[i-1] = float64(v) // NaN passes through: a broken reward is data the step reports
	}
	return out
}
