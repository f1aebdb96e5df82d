package luabind

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// A recipe declares what its own values must be as the second argument of rook.config, one
// rule per key (a section's settings are checked by their call's own rules):
//
//	"integer >= 1"     an integer, compared (>=, >, <=, <; also ≥ and ≤)
//	"> 0", "<= 10"     a finite number, compared
//	"[0, 1]"           a finite number in the closed interval ("integer [1, 64]": an integer)
//	"finite"           a finite number
//	"one of a, b, c"   one of the listed strings
//	function(v)        returns true, or false and a reason
//
// A string rule may end in ", fixed" (or be "fixed" alone): the key cannot change when the run
// is resumed (as model and seed cannot), refused by rook.config before anything is loaded. A
// section's setting, named with its section ("stockfish.depth"), takes only "fixed".

var ruleSyntax = regexp.MustCompile(`^(integer|finite)?\s*(?:(>=|≥|<=|≤|>|<)\s*(\S+)|\[([^,\]]+),([^\]]+)\])?$`)

// parseRule returns what a rule's text wants, for messages ("an integer ≥ 1"), and its test.
func parseRule(text string) (want string, ok func(any) bool, err error) {
	s := strings.TrimSpace(text)
	if rest, isList := strings.CutPrefix(s, "one of "); isList {
		words := strings.FieldsFunc(rest, func(r rune) bool { return r == ',' || r == ' ' })
		if len(words) == 0 {
			return "", nil, fmt.Errorf("rule %q lists no values", text)
		}
		return "one of " + strings.Join(words, ", "), func(v any) bool { w, _ := v.(string); return slices.Contains(words, w) }, nil
	}
	m := ruleSyntax.FindStringSubmatch(s)
	if m == nil || s == "" {
		return "", nil, fmt.Errorf(`rule %q is not one of "integer", "> x", ">= x", "< x", "<= x", "[lo, hi]", "finite", "one of a, b"`, text)
	}
	integer := m[1] == "integer"
	want = map[bool]string{true: "an integer", false: "a finite number"}[integer]
	num := func(v any) (float64, bool) {
		x, isNum := v.(float64)
		return x, isNum && !math.IsNaN(x) && !math.IsInf(x, 0) && (!integer || x == math.Trunc(x))
	}
	bound := func(b string) (float64, error) {
		x, err := strconv.ParseFloat(strings.TrimSpace(b), 64)
		if err != nil {
			return 0, fmt.Errorf("rule %q: %q is not a number", text, strings.TrimSpace(b))
		}
		return x, nil
	}
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	switch {
	case m[2] != "":
		a, err := bound(m[3])
		op := map[string]string{">=": "≥", "<=": "≤"}[m[2]]
		if op == "" {
			op = m[2]
		}
		cmp := map[string]func(x float64) bool{"≥": func(x float64) bool { return x >= a }, "≤": func(x float64) bool { return x <= a },
			">": func(x float64) bool { return x > a }, "<": func(x float64) bool { return x < a }}[op]
		return want + " " + op + " " + g(a), func(v any) bool { x, ok := num(v); return ok && cmp(x) }, err
	case m[4] != "":
		a, errA := bound(m[4])
		b, errB := bound(m[5])
		if errA != nil || errB != nil || a > b {
			return "", nil, fmt.Errorf("rule %q: want an interval [lo, hi]", text)
		}
		return want + " in [" + g(a) + ", " + g(b) + "]", func(v any) bool { x, ok := num(v); return ok && x >= a && x <= b }, nil
	}
	return want, func(v any) bool { _, ok := num(v); return ok }, nil
}

// checkRules applies a recipe's declared rules to its resolved config (nil rules: none), in
// key order, and returns the keys a resume may not change. The first value that breaks its
// rule is a *ConfigError naming the key.
func checkRules(L *lua.LState, g *guard, cfg map[string]any, rules *lua.LTable) (fixed []string, err error) {
	if rules == nil {
		return nil, nil
	}
	byKey := map[string]lua.LValue{}
	rules.ForEach(func(k, v lua.LValue) { byKey[k.String()] = v })
	for _, key := range sortedKeys(byKey) {
		bad := func(format string, a ...any) ([]string, error) {
			return nil, &ConfigError{Source: "config rules", Key: key, Reason: fmt.Sprintf(format, a...)}
		}
		v, declared := cfg[key]
		if sec, setting, dotted := strings.Cut(key, "."); dotted {
			m, _ := cfg[sec].(map[string]any)
			if _, declared = m[setting]; !declared {
				return bad("not a setting of the config")
			}
		} else if !declared {
			return bad("not a key of the config%s", didYouMean(key, sortedKeys(cfg)))
		}
		switch r := byKey[key].(type) {
		case lua.LString:
			text := strings.TrimSpace(string(r))
			if rest, isFixed := strings.CutSuffix(text, "fixed"); isFixed && (rest == "" || strings.HasSuffix(strings.TrimSpace(rest), ",")) {
				fixed, text = append(fixed, key), strings.TrimSuffix(strings.TrimSpace(rest), ",")
			}
			if text == "" {
				continue
			} else if strings.Contains(key, ".") {
				return bad(`a section's setting is checked by its own call; the only rule for it is "fixed"`)
			}
			want, ok, err := parseRule(text)
			if err != nil {
				return bad("%v", err)
			}
			if !ok(v) {
				return nil, &ConfigError{Key: key, Value: v, Reason: fmt.Sprintf("must be %s, got %s", want, show(v))}
			}
		case *lua.LFunction:
			g.inLua(func() { err = L.CallByParam(lua.P{Fn: r, NRet: 2, Protect: true}, fromGo(L, v)) })
			if err != nil {
				return bad("%v", err)
			}
			if okv, why := L.Get(-2), L.Get(-1); !lua.LVAsBool(okv) {
				L.Pop(2)
				return nil, &ConfigError{Key: key, Value: v, Reason: fmt.Sprintf("%s: %s", show(v), map[bool]string{true: "not accepted by its rule", false: why.String()}[why == lua.LNil])}
			}
			L.Pop(2)
		default:
			return bad("a rule is a string or a function, got a %s", r.Type())
		}
	}
	return fixed, nil
}
