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
// alias tag lists older names that still reach it (`alias:"kl_coef"`). Embedded structs
// contribute their settings as if they were the outer struct's; fields tagged "-" or without
// a json tag are not settings. One decoder reads option tables and recipe configs into such
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
// from option table t (nil: no options). Keys in extra are the caller's and are skipped. An
// unknown key, a value of the wrong type, or one setting given under two of its names is an
// error naming the key.
func decodeOptions(t *lua.LTable, dst any, extra ...string) error {
	if t == nil {
		return nil
	}
	values := map[string]any{}
	var err error
	t.ForEach(func(k, v lua.LValue) {
		ks, ok := k.(lua.LString)
		switch {
		case err != nil:
		case !ok:
			err = fmt.Errorf("option keys are names, got %s %s", k.Type(), k.String())
		case slices.Contains(extra, string(ks)):
		default:
			values[string(ks)] = scalar(v)
		}
	})
	if err != nil {
		return err
	}
	s := schemaOf(reflect.TypeOf(dst).Elem())
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, ok := s.canonical(k); !ok {
			return fmt.Errorf("unknown option %q%s", k, didYouMean(k, append(s.known(), extra...)))
		}
	}
	_, err = decodeValues(values, dst)
	return err
}

// decodeValues sets the fields of dst from the entries of values that are its settings,
// under their canonical names or aliases; other entries are left alone. It returns the keys
// it used.
func decodeValues(values map[string]any, dst any) ([]string, error) {
	s := schemaOf(reflect.TypeOf(dst).Elem())
	v := reflect.ValueOf(dst).Elem()
	var used []string
	for _, name := range s.names {
		f := s.fields[name]
		var given []string
		for _, k := range append([]string{name}, f.aliases...) {
			if _, ok := values[k]; ok {
				given = append(given, k)
			}
		}
		switch len(given) {
		case 0:
			continue
		case 1:
		default:
			return nil, fmt.Errorf("option %q is given twice, as %s", name, quoteList(given))
		}
		key := given[0]
		if err := setField(v.FieldByIndex(f.index), values[key]); err != nil {
			if key != name {
				return nil, fmt.Errorf("option %q (%s): %w", key, name, err)
			}
			return nil, fmt.Errorf("option %q: %w", key, err)
		}
		used = append(used, key)
	}
	return used, nil
}

// scalar is a Lua value as Go data for setField: tables and functions stay Lua values so the
// error can say what they are.
func scalar(v lua.LValue) any {
	switch x := v.(type) {
	case lua.LNumber:
		return float64(x)
	case lua.LString:
		return string(x)
	case lua.LBool:
		return bool(x)
	}
	return v
}

// setField stores x in field f, converting a number to the field's numeric kind.
func setField(f reflect.Value, x any) error {
	got := func() string {
		switch y := x.(type) {
		case lua.LValue:
			return "a " + y.Type().String()
		case float64:
			return fmt.Sprintf("%g", y)
		case string:
			return fmt.Sprintf("the string %q", y)
		case bool:
			return fmt.Sprintf("%t", y)
		}
		return fmt.Sprintf("a %T", x)
	}
	switch f.Kind() {
	case reflect.Float64, reflect.Float32:
		n, ok := x.(float64)
		if !ok {
			return fmt.Errorf("want a number, got %s", got())
		}
		f.SetFloat(n)
	case reflect.Int, reflect.Int32, reflect.Int64:
		n, ok := x.(float64)
		if !ok || n != math.Trunc(n) || math.Abs(n) > 1<<53 {
			return fmt.Errorf("want an integer, got %s", got())
		}
		f.SetInt(int64(n))
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		n, ok := x.(float64)
		if !ok || n != math.Trunc(n) || n < 0 || n > 1<<53 {
			return fmt.Errorf("want an integer ≥ 0, got %s", got())
		}
		f.SetUint(uint64(n))
	case reflect.Bool:
		b, ok := x.(bool)
		if !ok {
			return fmt.Errorf("want true or false, got %s", got())
		}
		f.SetBool(b)
	case reflect.String:
		s, ok := x.(string)
		if !ok {
			return fmt.Errorf("want a string, got %s", got())
		}
		f.SetString(s)
	default:
		return fmt.Errorf("a %s setting cannot be set from Lua", f.Type())
	}
	return nil
}

// settingsTable renders a config struct's settings as a Lua table under their canonical
// names (what rook.grpo.defaults() returns).
func settingsTable(L *lua.LState, src any) *lua.LTable {
	s := schemaOf(reflect.TypeOf(src))
	v := reflect.ValueOf(src)
	t := L.CreateTable(0, len(s.names))
	for _, name := range s.names {
		f := v.FieldByIndex(s.fields[name].index)
		switch f.Kind() {
		case reflect.Float64, reflect.Float32:
			t.RawSetString(name, lua.LNumber(f.Float()))
		case reflect.Int, reflect.Int32, reflect.Int64:
			t.RawSetString(name, lua.LNumber(f.Int()))
		case reflect.Uint64, reflect.Uint32, reflect.Uint:
			t.RawSetString(name, lua.LNumber(f.Uint()))
		case reflect.Bool:
			t.RawSetString(name, lua.LBool(f.Bool()))
		case reflect.String:
			t.RawSetString(name, lua.LString(f.String()))
		}
	}
	return t
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
