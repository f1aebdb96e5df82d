package luabind

import (
	"cmp"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/internal/editdist"
)

// One decoder reads every option table of the Lua API into a Go struct, the settings of
// recipe sections included. A struct names each setting once: the field's json tag is its
// one name, TRL's where TRL has the setting. Embedded structs contribute their settings as the outer struct's; a named struct field is
// a group of its own (policy = {best_rank = 0.5}), given as a sub-table; a pointer field takes a userdata of that type (policy = a rook.model); fields
// tagged "-" or without a json tag are not settings.

type schema struct {
	fields map[string]field // name → field
	names  []string         // names in declaration order
}

type field struct {
	index []int // reflect path through embedded structs
	typ   reflect.Type
}

var schemas sync.Map // reflect.Type → *schema

func schemaOf(t reflect.Type) *schema {
	if s, ok := schemas.Load(t); ok {
		return s.(*schema)
	}
	s := &schema{fields: map[string]field{}}
	s.collect(t, nil)
	schemas.Store(t, s)
	return s
}

func (s *schema) collect(t reflect.Type, prefix []int) {
	for i := range t.NumField() {
		f := t.Field(i)
		index := append(slices.Clone(prefix), i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && f.Type.Kind() == reflect.Struct && name == "" {
			s.collect(f.Type, index)
			continue
		}
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		if _, dup := s.fields[name]; !dup {
			s.names = append(s.names, name)
		}
		s.fields[name] = field{index: index, typ: f.Type} // an outer field shadows an embedded one
	}
}

// UnknownOptionError is a key no setting of a struct of settings has.
type UnknownOptionError struct{ What, Key, Suggestion string } // What: "option" (default) or "key"

func (e *UnknownOptionError) Error() string {
	return fmt.Sprintf("unknown %s %q%s", cmp.Or(e.What, "option"), e.Key, e.Suggestion)
}

// OptionError is a value a setting cannot take: the setting by its path ("policy.best_rank"
// inside policy = {...}; "grpo.beta" in a config's section) and why.
type OptionError struct {
	Key string
	Err error
}

func (e *OptionError) Error() string { return fmt.Sprintf("option %q: %v", e.Key, e.Err) }
func (e *OptionError) Unwrap() error { return e.Err }

// check returns nil for the name of a setting, or an error for an unknown key, with a
// suggestion among this struct's own names.
func (s *schema) check(key, path string) error {
	if _, ok := s.fields[key]; ok {
		return nil
	}
	return &UnknownOptionError{Key: path + key, Suggestion: didYouMean(key, s.names)}
}

// options reads argument n of a call, an optional option table, into *dst over the defaults
// it holds, raising the call's error for a key or value it does not take.
func options(L *lua.LState, n int, call string, dst any) {
	if err := decode(L.Get(n), dst, ""); err != nil {
		L.RaiseError("%s: %s", call, err.Error())
	}
}

// decode sets the settings of *dst (a struct holding its defaults) from v: nil (no
// options) or an option table. path prefixes keys in messages ("policy." inside policy =
// {...}).
func decode(v lua.LValue, dst any, path string) error {
	return decodeValue(v, reflect.ValueOf(dst).Elem(), path)
}

func decodeValue(v lua.LValue, dst reflect.Value, path string) error {
	if v == lua.LNil {
		return nil
	}
	t, ok := v.(*lua.LTable)
	if !ok {
		return fmt.Errorf("want a table of settings, got %s", shownLua(v))
	}
	s := schemaOf(dst.Type())
	given := map[string]bool{}
	var keys []string
	var err error
	realTable(t).ForEach(func(k, _ lua.LValue) { // a module's settings, seen read-only, read through
		ks, isStr := k.(lua.LString)
		if !isStr && err == nil {
			err = fmt.Errorf("option keys are names, got %s %s", k.Type(), k.String())
		}
		keys = append(keys, string(ks))
	})
	slices.Sort(keys)
	for _, key := range keys {
		if err == nil {
			err, given[key] = s.check(key, path), true
		}
	}
	for _, key := range s.names {
		if !given[key] || err != nil {
			continue
		}
		f, x := dst.FieldByIndex(s.fields[key].index), realTable(t).RawGetString(key)
		_, isTable := x.(*lua.LTable)
		if err = setField(f, x, path+key+"."); err != nil && !(f.Kind() == reflect.Struct && isTable) {
			err = &OptionError{Key: path + key, Err: err} // a nested table names its keys by their path
		}
	}
	return err
}

// luaTypes names the Lua types of the userdata a setting may take.
var luaTypes = map[reflect.Type]string{reflect.TypeFor[*model](): modelType, reflect.TypeFor[*adam](): adamType,
	reflect.TypeFor[*positions](): positionsType, reflect.TypeFor[*stockfishPool](): stockfishType,
	reflect.TypeFor[*lua.LTable](): "table", reflect.TypeFor[*lua.LFunction](): "function"}

// setField stores Lua value x in f: a number in a numeric field (an integer where the field
// is one), a string in a string field (named string types too), a list in a slice, a table
// or a section in a struct, a userdata of the field's type in a pointer field.
func setField(f reflect.Value, x lua.LValue, path string) error {
	n, isNum := x.(lua.LNumber)
	v := float64(n)
	whole := isNum && v == math.Trunc(v) && math.Abs(v) <= 1<<53
	var want string
	switch f.Kind() {
	case reflect.Float64, reflect.Float32:
		if want = "a number"; isNum {
			f.SetFloat(v)
			return nil
		}
	case reflect.Int, reflect.Int32, reflect.Int64:
		if want = "an integer"; whole {
			f.SetInt(int64(v))
			return nil
		}
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		if want = "an integer ≥ 0"; whole && v >= 0 {
			f.SetUint(uint64(v))
			return nil
		}
	case reflect.Bool:
		b, ok := x.(lua.LBool)
		if want = "true or false"; ok {
			f.SetBool(bool(b))
			return nil
		}
	case reflect.String:
		s, ok := x.(lua.LString)
		if want = "a string"; ok {
			f.SetString(string(s))
			return nil
		}
	case reflect.Struct:
		return decodeValue(x, f, path)
	case reflect.Slice:
		t, ok := x.(*lua.LTable)
		count := 0
		if ok {
			t.ForEach(func(lua.LValue, lua.LValue) { count++ })
		}
		if want = "a list"; ok && count != t.Len() {
			return fmt.Errorf("want a list (keys 1, 2, …, n), got a table with other keys")
		} else if !ok {
			break
		}
		out := reflect.MakeSlice(f.Type(), t.Len(), t.Len())
		for i := range t.Len() {
			if err := setField(out.Index(i), t.RawGetInt(i+1), path); err != nil {
				return fmt.Errorf("element %d: %w", i+1, err)
			}
		}
		f.Set(out)
		return nil
	case reflect.Pointer, reflect.Interface:
		if want = luaTypes[f.Type()]; want == "" {
			want = f.Type().String()
		}
		want = "a " + want
		if ud, ok := x.(*lua.LUserData); ok && ud.Value != nil && reflect.TypeOf(ud.Value) == f.Type() {
			f.Set(reflect.ValueOf(ud.Value))
			return nil
		}
		if rv := reflect.ValueOf(x); x == lua.LNil || rv.Type().AssignableTo(f.Type()) { // a raw Lua value
			if x != lua.LNil {
				f.Set(rv)
			}
			return nil
		}
	default:
		return fmt.Errorf("a %s setting cannot be set from Lua", f.Type())
	}
	return fmt.Errorf("want %s, got %s", want, shownLua(x))
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

// didYouMean proposes the closest of known to a misspelt key.
func didYouMean(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := editdist.Levenshtein(key, k); d < bestD || (d == bestD && k < best) {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
