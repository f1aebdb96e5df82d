package luabind

import (
	"context"
	"fmt"
	"sort"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Eval runs one REPL chunk. An expression's values come back pretty-printed (tables with
// sorted keys, metrics one per line); a statement returns no values. Incomplete reports a
// chunk that ends before its syntax does (an open function, string or table), so the REPL can
// read another line and try again.
func (e *Env) Eval(ctx context.Context, chunk string) (values []string, incomplete bool, err error) {
	fn, perr := e.L.Load(strings.NewReader("return "+chunk), "stdin")
	if perr != nil {
		fn, perr = e.L.Load(strings.NewReader(chunk), "stdin")
	}
	if perr != nil {
		if isIncomplete(perr) {
			return nil, true, nil
		}
		return nil, false, &RecipeError{Message: perr.Error()}
	}
	top := e.L.GetTop()
	e.L.Push(fn)
	if err := e.call(ctx, 0, lua.MultRet); err != nil {
		e.L.SetTop(top)
		return nil, false, err
	}
	for i := top + 1; i <= e.L.GetTop(); i++ {
		values = append(values, Pretty(e.L.Get(i)))
	}
	e.L.SetTop(top)
	return values, false, nil
}

// isIncomplete recognises gopher-lua's parse errors at end of input.
func isIncomplete(err error) bool {
	s := err.Error()
	return strings.Contains(s, "at EOF") || strings.Contains(s, "<eof>") || strings.Contains(s, "unterminated string")
}

// Pretty formats a Lua value for the REPL.
func Pretty(v lua.LValue) string {
	var b strings.Builder
	pretty(&b, v, 0, map[*lua.LTable]bool{})
	return b.String()
}

func pretty(b *strings.Builder, v lua.LValue, indent int, seen map[*lua.LTable]bool) {
	switch x := v.(type) {
	case lua.LString:
		fmt.Fprintf(b, "%q", string(x))
	case lua.LNumber:
		b.WriteString(formatNumber(float64(x)))
	case *lua.LTable:
		x = realTable(x) // a confined recipe's read-only view prints as what it shows
		if seen[x] {
			b.WriteString("<cycle>")
			return
		}
		seen[x] = true
		defer delete(seen, x)
		n := x.Len()
		var keys []lua.LValue
		x.ForEach(func(k, _ lua.LValue) {
			if kn, ok := k.(lua.LNumber); ok && int(kn) >= 1 && int(kn) <= n && float64(int(kn)) == float64(kn) {
				return
			}
			keys = append(keys, k)
		})
		if n+len(keys) == 0 {
			b.WriteString("{}")
			return
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		if len(keys) == 0 && n <= 16 && scalars(x, n) {
			b.WriteString("{")
			for i := 1; i <= n; i++ {
				if i > 1 {
					b.WriteString(", ")
				}
				pretty(b, x.RawGetInt(i), indent+1, seen)
			}
			b.WriteString("}")
			return
		}
		pad := strings.Repeat("  ", indent+1)
		b.WriteString("{\n")
		for i := 1; i <= n; i++ {
			b.WriteString(pad)
			pretty(b, x.RawGetInt(i), indent+1, seen)
			b.WriteString(",\n")
		}
		for _, k := range keys {
			b.WriteString(pad)
			if ks, ok := k.(lua.LString); ok && keyPattern.MatchString(string(ks)) && !strings.Contains(string(ks), ".") {
				b.WriteString(string(ks))
			} else {
				b.WriteString("[")
				pretty(b, k, indent+1, seen)
				b.WriteString("]")
			}
			b.WriteString(" = ")
			pretty(b, x.RawGet(k), indent+1, seen)
			b.WriteString(",\n")
		}
		b.WriteString(strings.Repeat("  ", indent) + "}")
	case *lua.LUserData:
		if s, ok := x.Value.(fmt.Stringer); ok {
			b.WriteString(s.String())
		} else {
			b.WriteString(describe(x))
		}
	default:
		b.WriteString(v.String())
	}
}

// scalars reports whether elements 1..n of t are all numbers, strings or booleans.
func scalars(t *lua.LTable, n int) bool {
	for i := 1; i <= n; i++ {
		switch t.RawGetInt(i).(type) {
		case lua.LNumber, lua.LString, lua.LBool:
		default:
			return false
		}
	}
	return true
}

func formatNumber(f float64) string {
	if f == float64(int64(f)) && f < 1e15 && f > -1e15 {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.6g", f)
}

// Complete returns completions for the identifier path that ends line: global names,
// fields of tables (rook.gr → rook.grpo) and methods of userdata (policy:ro → policy:rollout).
// Each candidate is the whole line with its last path replaced.
func (e *Env) Complete(line string) []string {
	start := len(line)
	for start > 0 {
		c := line[start-1]
		if c == '_' || c == '.' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			start--
			continue
		}
		break
	}
	head, path := line[:start], line[start:]
	sep := strings.LastIndexAny(path, ".:")
	var scope lua.LValue = e.L.Get(lua.GlobalsIndex)
	prefix, partial := "", path
	method := false
	if sep >= 0 {
		prefix, partial = path[:sep+1], path[sep+1:]
		method = path[sep] == ':'
		scope = e.lookup(path[:sep])
	}
	var names []string
	add := func(k string) {
		if strings.HasPrefix(k, partial) && !strings.HasPrefix(k, "__") {
			names = append(names, k)
		}
	}
	switch s := scope.(type) {
	case *lua.LTable:
		if !method {
			realTable(s).ForEach(func(k, _ lua.LValue) {
				if ks, ok := k.(lua.LString); ok {
					add(string(ks))
				}
			})
		}
	case *lua.LUserData:
		if mt, ok := s.Metatable.(*lua.LTable); ok {
			if m, ok := mt.RawGetString("__methods").(*lua.LTable); ok {
				m.ForEach(func(_, v lua.LValue) { add(v.String()) })
			}
		}
	}
	if scope == e.L.Get(lua.GlobalsIndex) && !e.hasGlobal("rook") && strings.HasPrefix("rook", partial) {
		names = append(names, "rook") // offer the module even before it is required
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = head + prefix + n
	}
	return out
}

func (e *Env) hasGlobal(name string) bool { return e.L.GetGlobal(name) != lua.LNil }

// lookup resolves a dotted path ("rook.grpo") from the globals; the module rook resolves
// even when the chunk has not required it yet.
func (e *Env) lookup(path string) lua.LValue {
	parts := strings.FieldsFunc(path, func(r rune) bool { return r == '.' || r == ':' })
	var v lua.LValue = e.L.Get(lua.GlobalsIndex)
	for i, p := range parts {
		t, ok := v.(*lua.LTable)
		if !ok {
			return lua.LNil
		}
		v = realTable(t).RawGetString(p)
		if i == 0 && v == lua.LNil && p == "rook" {
			v = e.rookModule()
		}
	}
	return v
}

// rookModule returns module rook, loading it if needed.
func (e *Env) rookModule() lua.LValue {
	if err := e.L.DoString(`return require("rook")`); err != nil {
		return lua.LNil
	}
	v := e.L.Get(-1)
	e.L.Pop(1)
	return v
}

// Globals lists the global names, for the REPL's help.
func (e *Env) Globals() []string {
	var out []string
	e.L.Get(lua.GlobalsIndex).(*lua.LTable).ForEach(func(k, _ lua.LValue) { out = append(out, k.String()) })
	sort.Strings(out)
	return out
}
