package luabind

import (
	"fmt"
	"math"
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
//	"[0, 1]"           a finite number in the closed interval
//	"integer [1, 64]"  an integer in the closed interval
//	"finite"           a finite number
//	"one of a, b, c"   one of the listed strings
//	function(v)        returns true, or false and a reason
//
// A string rule may end in ", fixed" (or be "fixed" alone): the key cannot change when the run
// is resumed (as model and seed cannot), refused by rook.config before anything is loaded. A
// section's setting, named with its section ("stockfish.depth"), takes only "fixed".

// parseRule returns what a rule's text wants, for messages ("an integer ≥ 1"), and its test.
func parseRule(text string) (want string, ok func(any) bool, err error) {
	s := strings.TrimSpace(text)
	if rest, isList := strings.CutPrefix(s, "one of "); isList {
		var words []string
		for _, w := range strings.Split(rest, ",") {
			if w = strings.TrimSpace(w); w != "" {
				words = append(words, w)
			}
		}
		if len(words) == 0 {
			return "", nil, fmt.Errorf("rule %q lists no values", text)
		}
		return "one of " + strings.Join(words, ", "), func(v any) bool { w, _ := v.(string); return slices.Contains(words, w) }, nil
	}
	want = "a finite number"
	rest, integer := strings.CutPrefix(s, "integer")
	if integer {
		want = "an integer"
	}
	rest = strings.TrimSpace(rest)
	num := func(v any) (float64, bool) {
		x, isNum := v.(float64)
		return x, isNum && !math.IsNaN(x) && !math.IsInf(x, 0) && (!integer || x == math.Trunc(x))
	}
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	switch {
	case rest == "" && integer, rest == "finite":
		return want, func(v any) bool { _, ok := num(v); return ok }, nil
	case strings.HasPrefix(rest, "[") && strings.HasSuffix(rest, "]"):
		lo, hi, found := strings.Cut(rest[1:len(rest)-1], ",")
		a, errA := strconv.ParseFloat(strings.TrimSpace(lo), 64)
		b, errB := strconv.ParseFloat(strings.TrimSpace(hi), 64)
		if !found || errA != nil || errB != nil || a > b {
			return "", nil, fmt.Errorf("rule %q: want an interval [lo, hi]", text)
		}
		return want + " in [" + g(a) + ", " + g(b) + "]", func(v any) bool { x, ok := num(v); return ok && x >= a && x <= b }, nil
	}
	for _, c := range []struct {
		spelled, shown string
		cmp            func(x, a float64) bool
	}{
		{">=", "≥", func(x, a float64) bool { return x >= a }}, {"≥", "≥", func(x, a float64) bool { return x >= a }},
		{"<=", "≤", func(x, a float64) bool { return x <= a }}, {"≤", "≤", func(x, a float64) bool { return x <= a }},
		{">", ">", func(x, a float64) bool { return x > a }}, {"<", "<", func(x, a float64) bool { return x < a }},
	} {
		if bound, found := strings.CutPrefix(rest, c.spelled); found {
			a, err := strconv.ParseFloat(strings.TrimSpace(bound), 64)
			if err != nil {
				return "", nil, fmt.Errorf("rule %q: %q is not a number", text, strings.TrimSpace(bound))
			}
			return want + " " + c.shown + " " + g(a), func(v any) bool { x, ok := num(v); return ok && c.cmp(x, a) }, nil
		}
	}
	return "", nil, fmt.Errorf(`rule %q is not one of "integer", "> x", ">= x", "< x", "<= x", "[lo, hi]", "finite", "one of a, b"`, text)
}

// checkRules applies a recipe's declared rules to its resolved config (nil rules: none), in
// key order. The first value that breaks its rule is an error naming the key, the rule and
// the value.
func checkRules(L *lua.LState, g *guard, cfg map[string]any, rules *lua.LTable) (fixed []string, err error) {
	if rules == nil {
		return nil, nil
	}
	byKey := map[string]lua.LValue{}
	var bad error
	rules.ForEach(func(k, v lua.LValue) {
		if ks, ok := k.(lua.LString); ok {
			byKey[string(ks)] = v
		} else if bad == nil {
			bad = fmt.Errorf("config rules: key %s is not a name", k.String())
		}
	})
	if bad != nil {
		return nil, bad
	}
	for _, key := range sortedKeys(byKey) {
		if sec, setting, dotted := strings.Cut(key, "."); dotted {
			// A section's settings are checked by its call; a rule can only fix one.
			m, _ := cfg[sec].(map[string]any)
			if _, declared := m[setting]; !declared {
				return nil, fmt.Errorf("config rules: %q is not a setting of the config", key)
			}
			if r, _ := byKey[key].(lua.LString); strings.TrimSpace(string(r)) != "fixed" {
				return nil, fmt.Errorf("config rules: %s: a section's setting is checked by its own call; the only rule for it is \"fixed\"", key)
			}
			fixed = append(fixed, key)
			continue
		}
		v, declared := cfg[key]
		if !declared {
			return nil, fmt.Errorf("config rules: %q is not a key of the config%s", key, didYouMean(key, sortedKeys(cfg)))
		}
		switch r := byKey[key].(type) {
		case lua.LString:
			text := strings.TrimSpace(string(r))
			if rest, isFixed := strings.CutSuffix(text, "fixed"); isFixed && (rest == "" || strings.HasSuffix(strings.TrimSpace(rest), ",")) {
				fixed = append(fixed, key)
				if text = strings.TrimSuffix(strings.TrimSpace(rest), ","); text == "" {
					continue
				}
			}
			want, ok, err := parseRule(text)
			if err != nil {
				return nil, fmt.Errorf("config rules: %s: %w", key, err)
			}
			if !ok(v) {
				return nil, fmt.Errorf("config: %s must be %s, got %s", key, want, shown(v))
			}
		case *lua.LFunction:
			var err error
			g.inLua(func() { err = L.CallByParam(lua.P{Fn: r, NRet: 2, Protect: true}, fromGo(L, v)) })
			if err != nil {
				return nil, fmt.Errorf("config rules: %s: %w", key, err)
			}
			okv, why := L.Get(-2), L.Get(-1)
			L.Pop(2)
			if !lua.LVAsBool(okv) {
				reason := "not accepted by its rule"
				if why != lua.LNil {
					reason = why.String()
				}
				return nil, fmt.Errorf("config: %s = %s: %s", key, shown(v), reason)
			}
		default:
			return nil, fmt.Errorf("config rules: %s: a rule is a string or a function, got a %s", key, r.Type())
		}
	}
	return fixed, nil
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
