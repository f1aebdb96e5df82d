package luabind

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// A recipe declares what its own config values must be as the second argument of
// rook.config, one rule per key:
//
//	"integer >= 1"     an integer, compared (>=, >, <=, <; also ≥ and ≤)
//	"> 0", "<= 10"     a finite number, compared
//	"[0, 1]"           a finite number in the closed interval
//	"integer [1, 64]"  an integer in the closed interval
//	"finite"           a finite number
//	"one of a, b, c"   one of the listed strings
//	function(v)        returns true, or false and a reason
//
// Engine settings are not declared here: their own structs check them (rook.check).
type rule struct {
	integer bool
	op      string // "", ">=", ">", "<=", "<", "[]", "one of"
	a, b    float64
	words   []string
}

func parseRule(text string) (rule, error) {
	var r rule
	s := strings.TrimSpace(text)
	if rest, ok := strings.CutPrefix(s, "one of "); ok {
		r.op = "one of"
		for _, w := range strings.Split(rest, ",") {
			if w = strings.TrimSpace(w); w != "" {
				r.words = append(r.words, w)
			}
		}
		if len(r.words) == 0 {
			return r, fmt.Errorf("rule %q lists no values", text)
		}
		return r, nil
	}
	if rest, ok := strings.CutPrefix(s, "integer"); ok {
		r.integer, s = true, strings.TrimSpace(rest)
	}
	switch {
	case s == "" && r.integer, s == "finite":
		return r, nil
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		lo, hi, ok := strings.Cut(s[1:len(s)-1], ",")
		a, errA := strconv.ParseFloat(strings.TrimSpace(lo), 64)
		b, errB := strconv.ParseFloat(strings.TrimSpace(hi), 64)
		if !ok || errA != nil || errB != nil || a > b {
			return r, fmt.Errorf("rule %q: want an interval [lo, hi]", text)
		}
		r.op, r.a, r.b = "[]", a, b
		return r, nil
	}
	for _, op := range []struct{ spelled, op string }{{">=", ">="}, {"≥", ">="}, {"<=", "<="}, {"≤", "<="}, {">", ">"}, {"<", "<"}} {
		if rest, ok := strings.CutPrefix(s, op.spelled); ok {
			a, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				return r, fmt.Errorf("rule %q: %q is not a number", text, strings.TrimSpace(rest))
			}
			r.op, r.a = op.op, a
			return r, nil
		}
	}
	return r, fmt.Errorf(`rule %q is not one of "integer", "> x", ">= x", "< x", "<= x", "[lo, hi]", "finite", "one of a, b"`, text)
}

// String says what the rule wants, for messages: "an integer ≥ 1".
func (r rule) String() string {
	if r.op == "one of" {
		return "one of " + strings.Join(r.words, ", ")
	}
	what := "a finite number"
	if r.integer {
		what = "an integer"
	}
	g := strconv.FormatFloat
	switch r.op {
	case ">=":
		return what + " ≥ " + g(r.a, 'g', -1, 64)
	case ">":
		return what + " > " + g(r.a, 'g', -1, 64)
	case "<=":
		return what + " ≤ " + g(r.a, 'g', -1, 64)
	case "<":
		return what + " < " + g(r.a, 'g', -1, 64)
	case "[]":
		return what + " in [" + g(r.a, 'g', -1, 64) + ", " + g(r.b, 'g', -1, 64) + "]"
	}
	return what
}

func (r rule) ok(v any) bool {
	if r.op == "one of" {
		s, isStr := v.(string)
		for _, w := range r.words {
			if isStr && s == w {
				return true
			}
		}
		return false
	}
	x, isNum := v.(float64)
	if !isNum || math.IsNaN(x) || math.IsInf(x, 0) || (r.integer && x != math.Trunc(x)) {
		return false
	}
	switch r.op {
	case ">=":
		return x >= r.a
	case ">":
		return x > r.a
	case "<=":
		return x <= r.a
	case "<":
		return x < r.a
	case "[]":
		return x >= r.a && x <= r.b
	}
	return true
}

// checkRules applies a recipe's declared rules to its resolved config (nil rules: none).
// The first value that breaks its rule is an error naming the key, the rule and the value.
func checkRules(L *lua.LState, cfg map[string]any, rules *lua.LTable) error {
	if rules == nil {
		return nil
	}
	type entry struct {
		key string
		v   lua.LValue
	}
	var entries []entry
	var bad error
	rules.ForEach(func(k, v lua.LValue) {
		ks, ok := k.(lua.LString)
		if !ok && bad == nil {
			bad = fmt.Errorf("config rules: key %s is not a name", k.String())
		}
		entries = append(entries, entry{string(ks), v})
	})
	if bad != nil {
		return bad
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].key < entries[j].key })
	for _, e := range entries {
		v, declared := cfg[e.key]
		if !declared {
			return fmt.Errorf("config rules: %q is not a key of the config%s", e.key, suggest(e.key, cfg))
		}
		switch r := e.v.(type) {
		case lua.LString:
			parsed, err := parseRule(string(r))
			if err != nil {
				return fmt.Errorf("config rules: %s: %w", e.key, err)
			}
			if !parsed.ok(v) {
				return fmt.Errorf("config: %s must be %s, got %s", e.key, parsed, shown(v))
			}
		case *lua.LFunction:
			if err := L.CallByParam(lua.P{Fn: r, NRet: 2, Protect: true}, fromGo(L, v)); err != nil {
				return fmt.Errorf("config rules: %s: %w", e.key, err)
			}
			okv, why := L.Get(-2), L.Get(-1)
			L.Pop(2)
			if !lua.LVAsBool(okv) {
				reason := "not accepted by its rule"
				if why != lua.LNil {
					reason = why.String()
				}
				return fmt.Errorf("config: %s = %s: %s", e.key, shown(v), reason)
			}
		default:
			return fmt.Errorf("config rules: %s: a rule is a string or a function, got a %s", e.key, e.v.Type())
		}
	}
	return nil
}

// shown writes a config value for a message.
func shown(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}
