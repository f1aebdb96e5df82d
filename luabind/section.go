package luabind

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
	"github.com/rookscript/rookscript/engine/rookworld"
	"github.com/rookscript/rookscript/engine/stockfish"
)

// A section is the settings of one engine call, resolved and checked once: a recipe's
// config declares `grpo = { beta = 0.05 }`, rook.config decodes it over the engine's
// defaults into grpo.Config and validates it, and cfg.grpo hands that value to
// rook.grpo.step as it is. A value a recipe changes between calls (the KL warm-up's β, a
// rollout's seed) goes through the section's one setter, cfg.grpo.beta = x, which validates
// the whole section again.
type sectionSpec struct {
	name, call string
	typ        reflect.Type
	defaults   func(trl bool) any // a pointer to the call's defaults (TRL's with trl)
	check      func(p any) error  // validates *p, after folding in any shorthand
	elsewhere  map[string]string  // keys that belong to another section, and where
}

const sectionType = "rook.settings"

func newSection[T any](name, call string, defaults func(trl bool) T, check func(*T) error) *sectionSpec {
	return &sectionSpec{name: name, call: call, typ: reflect.TypeFor[T](),
		defaults: func(trl bool) any { d := defaults(trl); return &d },
		check:    func(p any) error { return check(p.(*T)) }}
}

var notHere = map[string]string{"lr": "the learning rate is the optimizer's: adamw.lr (rook.adamw)"}

var sectionSpecs = []*sectionSpec{
	newSection("grpo", "rook.grpo.step", func(trl bool) grpo.Config {
		if trl {
			return grpo.TRLConfig()
		}
		return grpo.DefaultConfig()
	}, func(c *grpo.Config) error { return c.Validate() }),
	newSection("rollout", "policy:rollout", func(bool) rollout.Config { return rollout.DefaultConfig() },
		func(c *rollout.Config) error { return c.Validate() }),
	newSection("adamw", "rook.adamw", func(bool) adamwOptions {
		return adamwOptions{AdamWConfig: optim.DefaultAdamW(), Schedule: optim.ConstantSchedule()}
	}, func(o *adamwOptions) error {
		if o.Betas != nil {
			if len(o.Betas) != 2 {
				return fmt.Errorf("adamw: betas must be {beta1, beta2}, got %d numbers", len(o.Betas))
			}
			o.Beta1, o.Beta2, o.Betas = o.Betas[0], o.Betas[1], nil
		}
		if err := o.AdamWConfig.Validate(); err != nil {
			return err
		}
		return prefixed("adamw", o.Schedule.Validate())
	}),
	newSection("reward", "rook.reward.chess", func(bool) rookworld.RewardConfig { return rookworld.DefaultRewardConfig() },
		func(c *rookworld.RewardConfig) error { return prefixed("reward", c.Validate()) }),
	newSection("stockfish", "rook.stockfish", func(bool) stockfish.Config { return stockfish.DefaultConfig() },
		func(c *stockfish.Config) error { return c.Validate() }),
	newSection("eval", "rook.eval", func(bool) evalOptions {
		return evalOptions{MaxNewTokens: rookworld.MaxAnswerTokens, Temperature: 1, Greedy: true, Reward: rookworld.DefaultRewardConfig()}
	}, func(o *evalOptions) error {
		if err := o.rollout().Validate(); err != nil {
			return prefixed("eval", err)
		}
		return prefixed("eval: reward", o.Reward.Validate())
	}),
	newSection("sft", "rook.sft.step", func(bool) sftOptions {
		return sftOptions{MaxGradNorm: 1, sftLossOptions: sftLossOptions{LossOn: "completion"}}
	}, func(o *sftOptions) error { _, err := o.completionOnly(); return err }),
}

func init() {
	for _, s := range sectionSpecs {
		if s.name == "grpo" || s.name == "sft" {
			s.elsewhere = notHere
		}
	}
}

func prefixed(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

func sectionNamed(name string) *sectionSpec {
	for _, s := range sectionSpecs {
		if s.name == name {
			return s
		}
	}
	return nil
}

// read decodes v (nil, an option table or a section of this kind) over the call's defaults
// and checks the result; it returns a pointer to the settings. path prefixes keys in
// messages ("grpo." for a config's section).
func (s *sectionSpec) read(v lua.LValue, path string) (any, error) {
	if sec := sectionOf(v); sec != nil {
		if sec.spec != s {
			return nil, fmt.Errorf("want %s's settings, got the %s section", s.call, sec.spec.name)
		}
		p := reflect.New(s.typ)
		p.Elem().Set(sec.live.Elem())
		return p.Interface(), nil
	}
	t, _ := v.(*lua.LTable)
	if t != nil {
		for k, where := range s.elsewhere {
			if t.RawGetString(k) != lua.LNil {
				return nil, fmt.Errorf("option %q: %s", path+k, where)
			}
		}
	}
	p := s.defaults(t != nil && t.RawGetString("trl_compat") == lua.LTrue)
	if err := decode(v, p, path); err != nil {
		return nil, err
	}
	return p, s.check(p)
}

// section is a resolved section: the settings the calls read, as a pointer to the struct.
type section struct {
	spec *sectionSpec
	live reflect.Value
}

func sectionOf(v lua.LValue) *section {
	if ud, ok := v.(*lua.LUserData); ok {
		if s, ok := ud.Value.(*section); ok {
			return s
		}
	}
	return nil
}

// settingsArg reads argument n of call as the settings of the section called name, raising
// the call's error when they are not valid.
func settingsArg[T any](L *lua.LState, n int, name, call string) T {
	p, err := sectionNamed(name).read(L.Get(n), "")
	if err != nil {
		L.RaiseError("%s: %s", call, err.Error())
	}
	return *p.(*T)
}

// newSectionValue resolves a section from the table a config gives it.
func newSectionValue(s *sectionSpec, t *lua.LTable) (*section, error) {
	p, err := s.read(t, s.name+".")
	if err != nil {
		return nil, err
	}
	return &section{spec: s, live: reflect.ValueOf(p)}, nil
}

// record is the section's settings as a run's config.json keeps them: every setting, under
// its canonical name.
func (sec *section) record() map[string]any {
	b, err := json.Marshal(sec.live.Interface())
	if err != nil {
		panic(err) // settings structs hold numbers, strings, booleans and lists
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

func (sec *section) String() string {
	def := reflect.ValueOf(sec.spec.defaults(false)).Elem()
	s := schemaOf(sec.spec.typ)
	var parts []string
	for _, name := range s.names {
		f := s.fields[name]
		if v := sec.live.Elem().FieldByIndex(f.index); !reflect.DeepEqual(v.Interface(), def.FieldByIndex(f.index).Interface()) {
			b, _ := json.Marshal(v.Interface())
			parts = append(parts, name+"="+string(b))
		}
	}
	return fmt.Sprintf("%s settings {%s}", sec.spec.name, strings.Join(parts, ", "))
}

// registerSection makes the section type: its settings read and set by name.
func registerSection(L *lua.LState) {
	registerType(L, sectionType, nil, nil)
	mt := L.GetTypeMetatable(sectionType).(*lua.LTable)
	mt.RawSetString("__index", L.NewFunction(sectionIndex))
	mt.RawSetString("__newindex", L.NewFunction(sectionSet))
}

func checkSection(L *lua.LState, n int) *section {
	sec := sectionOf(L.Get(n))
	if sec == nil {
		L.ArgError(n, sectionType+" expected, got "+describe(L.Get(n)))
	}
	return sec
}

// cfg.grpo.beta → the setting's current value.
func sectionIndex(L *lua.LState) int {
	sec, key := checkSection(L, 1), L.CheckString(2)
	c, err := schemaOf(sec.spec.typ).canonical(key, sec.spec.name+".")
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	L.Push(luaValue(L, sec.live.Elem().FieldByIndex(schemaOf(sec.spec.typ).fields[c].index)))
	return 1
}

// cfg.grpo.beta = x: the one setter. The section with the new value must pass the same
// check as the config did; it then becomes what the next call reads.
func sectionSet(L *lua.LState) int {
	sec, key := checkSection(L, 1), L.CheckString(2)
	one := L.NewTable()
	one.RawSetString(key, L.Get(3))
	p := reflect.New(sec.spec.typ)
	p.Elem().Set(sec.live.Elem())
	err := decode(one, p.Interface(), sec.spec.name+".")
	if err == nil {
		err = sec.spec.check(p.Interface())
	}
	if err != nil {
		L.RaiseError("%s.%s = %s: %s", sec.spec.name, key, shownLua(L.Get(3)), err.Error())
	}
	sec.live = p
	return 0
}
