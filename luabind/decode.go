package luabind

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"
)

// A config struct names each setting once: the field's json tag is its canonical name, an
// alias tag lists other names that still reach it (`alias:"kl_coef"`). Embedded structs
// contribute their settings as if they were the outer struct's; a named struct field is a
// group of settings of its own (policy = {best_rank = 0.5}); fields tagged "-" or without a
// json tag are not settings. One decoder reads option tables and recipe configs into such
// structs, so no binding keeps a list of keys of its own.

// settings is a config struct's schema.
type settings struct {
	fields map[string]setting // canonical name → field
	alias  map[string]string  // alias → canonical name
	names  []string           // canonical names in declaration order
}

type setting struct {
	name    string
	index   []int // reflect path through embedded structs
	typ     reflect.Type
	aliases []string
}

var schemas sync.Map // reflect.Type → *settings

// schemaOf returns the schema of struct type t.
func schemaOf(t reflect.Type) *settings {
	if s, ok := schemas.Load(t); ok {
		return s.(*settings)
	}
	s := &settings{fields: map[string]setting{}, alias: map[string]string{}}
	s.collect(t, nil)
	schemas.Store(t, s)
	return s
}

func (s *settings) collect(t reflect.Type, prefix []int) {
	for i := range t.NumField() {
		f := t.Field(i)
		index := append(slices.Clone(prefix), i)
		tag, ok := f.Tag.Lookup("json")
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && f.Type.Kind() == reflect.Struct && name == "" {
			s.collect(f.Type, index)
			continue
		}
		if !ok || name == "" || name == "-" || !f.IsExported() {
			continue
		}
		st := setting{name: name, index: index, typ: f.Type}
		if a := f.Tag.Get("alias"); a != "" {
			st.aliases = strings.Split(a, ",")
			for _, al := range st.aliases {
				s.alias[al] = name
			}
		}
		s.fields[name] = st
		s.names = append(s.names, name)
	}
}

// canonical returns the canonical name of key (itself or the setting it is an alias of).
func (s *settings) canonical(key string) (string, bool) {
	if _, ok := s.fields[key]; ok {
		return key, true
	}
	c, ok := s.alias[key]
	return c, ok
}

// known lists every accepted key, canonical names first.
func (s *settings) known() []string {
	out := slices.Clone(s.names)
	for a := range s.alias {
		out = append(out, a)
	}
	slices.Sort(out[len(s.names):])
	return out
}

// decodeOptions sets the fields of dst (a pointer to a config struct holding its defaults)
// from option table t (nil: no options). Keys in extra are the caller's and are skipped. A
// nested config struct is read from a sub-table over its defaults (policy = {best_rank =
// 0.5} changes one weight), a slice from a list. An unknown key, a value of the wrong type,
// or one setting given under two of its names is an error naming the key by its path
// ("policy.best_rank").
func decodeOptions(t *lua.LTable, dst any, extra ...string) error {
	if t == nil {
		return nil
	}
	return decodeTable(t, reflect.ValueOf(dst).Elem(), "", extra)
}

// decodeTable sets the settings of struct v from t; path prefixes the keys in messages.
func decodeTable(t *lua.LTable, v reflect.Value, path string, extra []string) error {
	values := map[string]lua.LValue{}
	var badKey lua.LValue
	t.ForEach(func(k, val lua.LValue) {
		ks, ok := k.(lua.LString)
		switch {
		case !ok:
			if badKey == nil {
				badKey = k
			}
		case slices.Contains(extra, string(ks)):
		default:
			values[string(ks)] = val
		}
	})
	if badKey != nil {
		where := ""
		if path != "" {
			where = fmt.Sprintf(" (in %q)", strings.TrimSuffix(path, "."))
		}
		return fmt.Errorf("option keys are names, got %s %s%s", badKey.Type(), badKey.String(), where)
	}
	s := schemaOf(v.Type())
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, ok := s.canonical(k); !ok {
			known := append(s.known(), extra...)
			for i := range known {
				known[i] = path + known[i]
			}
			return fmt.Errorf("unknown option %q%s", path+k, didYouMean(path+k, known))
		}
	}
	for _, name := range s.names {
		f := s.fields[name]
		var given []string
		for _, k := range append([]string{name}, f.aliases...) {
			if _, ok := values[k]; ok {
				given = append(given, path+k)
			}
		}
		switch len(given) {
		case 0:
			continue
		case 1:
		default:
			return fmt.Errorf("option %q is given twice, as %s", path+name, quoteList(given))
		}
		key := strings.TrimPrefix(given[0], path)
		label := fmt.Sprintf("option %q", path+key)
		if key != name {
			label += " (" + name + ")"
		}
		x, fv := values[key], v.FieldByIndex(f.index)
		if fv.Kind() == reflect.Struct {
			sub, ok := x.(*lua.LTable)
			if !ok {
				return fmt.Errorf("%s: want a table of settings, got %s", label, shownLua(x))
			}
			if err := decodeTable(sub, fv, path+key+".", nil); err != nil {
				return err
			}
			continue
		}
		if err := setField(fv, x); err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
	}
	return nil
}

// shownLua writes a Lua value for a message: numbers, strings and booleans as they are,
// anything else by its type.
func shownLua(x lua.LValue) string {
	switch y := x.(type) {
	case lua.LNumber:
		return fmt.Sprintf("%g", float64(y))
	case lua.LString:
		return fmt.Sprintf("the string %q", string(y))
	case lua.LBool:
		return fmt.Sprintf("%t", bool(y))
	}
	return "a " + describe(x)
}

// setField stores Lua value x in field f: a number in a numeric field (an integer where
// the field is one), a string in a string field (named string types included), a list in
// a slice.
func setField(f reflect.Value, x lua.LValue) error {
	n, isNum := x.(lua.LNumber)
	switch f.Kind() {
	case reflect.Float64, reflect.Float32:
		if !isNum {
			return fmt.Errorf("want a number, got %s", shownLua(x))
		}
		f.SetFloat(float64(n))
	case reflect.Int, reflect.Int32, reflect.Int64:
		v := float64(n)
		if !isNum || v != math.Trunc(v) || math.Abs(v) > 1<<53 {
			return fmt.Errorf("want an integer, got %s", shownLua(x))
		}
		f.SetInt(int64(v))
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		v := float64(n)
		if !isNum || v != math.Trunc(v) || v < 0 || v > 1<<53 {
			return fmt.Errorf("want an integer ≥ 0, got %s", shownLua(x))
		}
		f.SetUint(uint64(v))
	case reflect.Bool:
		b, ok := x.(lua.LBool)
		if !ok {
			return fmt.Errorf("want true or false, got %s", shownLua(x))
		}
		f.SetBool(bool(b))
	case reflect.String:
		s, ok := x.(lua.LString)
		if !ok {
			return fmt.Errorf("want a string, got %s", shownLua(x))
		}
		f.SetString(string(s))
	case reflect.Slice:
		t, ok := x.(*lua.LTable)
		if !ok {
			return fmt.Errorf("want a list, got %s", shownLua(x))
		}
		n, count := t.Len(), 0
		t.ForEach(func(lua.LValue, lua.LValue) { count++ })
		if count != n {
			return fmt.Errorf("want a list (keys 1, 2, …, n), got a table with other keys")
		}
		out := reflect.MakeSlice(f.Type(), n, n)
		for i := range n {
			if err := setField(out.Index(i), t.RawGetInt(i+1)); err != nil {
				return fmt.Errorf("element %d: %w", i+1, err)
			}
		}
		f.Set(out)
	default:
		return fmt.Errorf("a %s setting cannot be set from Lua", f.Type())
	}
	return nil
}

// settingsTable renders a config struct's settings as a Lua table under their canonical
// names (what rook.grpo.defaults() returns): nested structs as sub-tables, slices as lists.
func settingsTable(L *lua.LState, src any) *lua.LTable {
	return structTable(L, reflect.ValueOf(src))
}

func structTable(L *lua.LState, v reflect.Value) *lua.LTable {
	s := schemaOf(v.Type())
	t := L.CreateTable(0, len(s.names))
	for _, name := range s.names {
		if x := luaValue(L, v.FieldByIndex(s.fields[name].index)); x != lua.LNil {
			t.RawSetString(name, x)
		}
	}
	return t
}

func luaValue(L *lua.LState, f reflect.Value) lua.LValue {
	switch f.Kind() {
	case reflect.Float64, reflect.Float32:
		return lua.LNumber(f.Float())
	case reflect.Int, reflect.Int32, reflect.Int64:
		return lua.LNumber(f.Int())
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		return lua.LNumber(f.Uint())
	case reflect.Bool:
		return lua.LBool(f.Bool())
	case reflect.String:
		return lua.LString(f.String())
	case reflect.Struct:
		return structTable(L, f)
	case reflect.Slice:
		t := L.CreateTable(f.Len(), 0)
		for i := range f.Len() {
			t.Append(luaValue(L, f.Index(i)))
		}
		return t
	}
	return lua.LNil
}

// didYouMean proposes the closest of known to a misspelt key.
func didYouMean(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(key, k); d < bestD || (d == bestD && k < best) {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
