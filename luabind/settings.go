package luabind

import (
	"fmt"
	"reflect"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/rollout"
)

// engineSettings are the config structs whose settings a recipe's flat config carries
// under their canonical names. rook.config accepts any name of one of their settings (an
// alias such as kl_coef for beta) for the name the recipe declared.
var engineSettings = []reflect.Type{
	reflect.TypeFor[grpo.Config](),
	reflect.TypeFor[rollout.Config](),
	reflect.TypeFor[adamwOptions](),
}

// sameSetting returns the key of m that names the same engine setting as key under another
// of its names (canonical or alias).
func sameSetting(key string, m map[string]any) (string, bool) {
	for _, t := range engineSettings {
		s := schemaOf(t)
		c, ok := s.canonical(key)
		if !ok {
			continue
		}
		for _, name := range append([]string{c}, s.fields[c].aliases...) {
			if _, declared := m[name]; declared && name != key {
				return name, true
			}
		}
	}
	return "", false
}

// otherNames lists the other names of the engine setting key names, if it is one.
func otherNames(key string) []string {
	var out []string
	for _, t := range engineSettings {
		s := schemaOf(t)
		if c, ok := s.canonical(key); ok {
			for _, name := range append([]string{c}, s.fields[c].aliases...) {
				if name != key {
					out = append(out, name)
				}
			}
		}
	}
	return out
}

// ConfigError is a config value a recipe cannot run with. It names its key and comes
// without a Lua traceback: the key says where to look.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string  { return e.Msg }
func (e *ConfigError) String() string { return e.Msg }

const configErrorType = "rook.config_error"

// raiseConfig raises a ConfigError at the calling recipe's line.
func raiseConfig(L *lua.LState, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if where := L.Where(1); where != "" {
		msg = where + " " + msg
	}
	ud := newUserData(L, configErrorType, &ConfigError{Msg: msg})
	L.Error(ud, 1)
}

// rook.check{grpo = opts, rollout = opts, adamw = opts [, model = policy]} validates option
// tables as rook.grpo.step, policy:rollout and rook.adamw read them, so a recipe can refuse
// a bad setting before it starts any expensive work. With model, the rollout's
// max_new_tokens is also checked against the model's context. A bad value raises an error
// naming its key.
func luaCheck(L *lua.LState) int {
	t := L.CheckTable(1)
	opts := func(key string) *lua.LTable {
		switch v := t.RawGetString(key).(type) {
		case *lua.LNilType:
			return nil
		case *lua.LTable:
			return v
		default:
			raiseConfig(L, "rook.check: %s must be an option table, got a %s", key, v.Type())
			return nil
		}
	}
	t.ForEach(func(k, _ lua.LValue) {
		switch k.String() {
		case "grpo", "rollout", "adamw", "model":
		default:
			raiseConfig(L, "rook.check: unknown option set %q%s", k.String(), didYouMean(k.String(), []string{"grpo", "rollout", "adamw", "model"}))
		}
	})
	if o := opts("grpo"); o != nil {
		if _, err := grpoOptions(o); err != nil {
			raiseConfig(L, "rook.check: rook.grpo.step: %s", bare(err, "grpo"))
		}
	}
	if o := opts("rollout"); o != nil {
		c := rollout.Config{Group: 8, MaxNewTokens: 128, Temperature: 1}
		err := decodeOptions(o, &c)
		if err == nil {
			err = c.Validate()
		}
		if err == nil && t.RawGetString("model") != lua.LNil {
			err = c.ValidateContext(checkModelField(L, t).m.Config.MaxSeqLen)
		}
		if err != nil {
			raiseConfig(L, "rook.check: policy:rollout: %s", bare(err, "rollout"))
		}
	}
	if o := opts("adamw"); o != nil {
		if _, err := readAdamW(o); err != nil {
			raiseConfig(L, "rook.check: rook.adamw: %s", bare(err, "adamw"))
		}
	}
	return 0
}

// bare is err's message without the engine package's "pkg: " prefix, for a message that
// already names the Lua call.
func bare(err error, pkg string) string { return strings.TrimPrefix(err.Error(), pkg+": ") }

func checkModelField(L *lua.LState, t *lua.LTable) *model {
	ud, ok := t.RawGetString("model").(*lua.LUserData)
	if ok {
		if m, ok := ud.Value.(*model); ok {
			return m
		}
	}
	L.ArgError(1, "model must be a rook.model, got "+describe(t.RawGetString("model")))
	return nil
}
