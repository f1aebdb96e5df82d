package luabind

import (
	"fmt"
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// opts reads a Lua option table field by field; done() then reports any key nobody read,
// so a misspelt option is an error naming it instead of a silently ignored setting.
type opts struct {
	L    *lua.LState
	t    *lua.LTable // nil: no options given
	what string      // e.g. "rook.adamw" for messages
	seen map[string]bool
}

func newOpts(L *lua.LState, t *lua.LTable, what string) *opts {
	return &opts{L: L, t: t, what: what, seen: map[string]bool{}}
}

// optsArg reads an optional option table at argument n.
func optsArg(L *lua.LState, n int, what string) *opts {
	return newOpts(L, L.OptTable(n, nil), what)
}

func (o *opts) get(key string) lua.LValue {
	o.seen[key] = true
	if o.t == nil {
		return lua.LNil
	}
	return o.t.RawGetString(key)
}

func (o *opts) fail(key, want string, got lua.LValue) {
	o.L.RaiseError("%s: option %q must be %s, got %s", o.what, key, want, got.Type().String())
}

func (o *opts) num(key string, def float64) float64 {
	switch v := o.get(key).(type) {
	case *lua.LNilType:
		return def
	case lua.LNumber:
		return float64(v)
	default:
		o.fail(key, "a number", v)
		return 0
	}
}

func (o *opts) int(key string, def int) int {
	v := o.num(key, float64(def))
	if v != float64(int(v)) {
		o.L.RaiseError("%s: option %q must be an integer, got %g", o.what, key, v)
	}
	return int(v)
}

func (o *opts) str(key, def string) string {
	switch v := o.get(key).(type) {
	case *lua.LNilType:
		return def
	case lua.LString:
		return string(v)
	default:
		o.fail(key, "a string", v)
		return ""
	}
}

func (o *opts) boolean(key string, def bool) bool {
	switch v := o.get(key).(type) {
	case *lua.LNilType:
		return def
	case lua.LBool:
		return bool(v)
	default:
		o.fail(key, "a boolean", v)
		return false
	}
}

// value returns the raw value of key (nil if absent).
func (o *opts) value(key string) lua.LValue { return o.get(key) }

// done raises an error for any key that was not read.
func (o *opts) done() {
	if o.t == nil {
		return
	}
	var unknown []string
	o.t.ForEach(func(k, _ lua.LValue) {
		if s, ok := k.(lua.LString); !ok || !o.seen[string(s)] {
			unknown = append(unknown, k.String())
		}
	})
	if len(unknown) == 0 {
		return
	}
	known := make([]string, 0, len(o.seen))
	for k := range o.seen {
		known = append(known, k)
	}
	sort.Strings(known)
	sort.Strings(unknown)
	o.L.RaiseError("%s: unknown option %s (known: %s)", o.what, quoteList(unknown), strings.Join(known, ", "))
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}
