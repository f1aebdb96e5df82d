package luabind

import (
	"encoding/json"
	"fmt"
	"reflect"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
	"github.com/rookscript/rookscript/engine/rookworld"
	"github.com/rookscript/rookscript/engine/stockfish"
)

// A section is the settings of one engine call, declared once as the engine's Go struct: its
// json tags name the settings, its Default* function gives their defaults, its Validate
// checks them. A recipe's config declares `grpo = { beta = 0.05 }`; rook.config decodes it
// over the defaults into grpo.Config and validates it (so a bad value stops the recipe before
// it loads anything), and hands the recipe every setting as one plain table, cfg.grpo. The
// recipe changes what it likes between calls (cfg.grpo.beta = x, the KL warm-up); a call
// given the table decodes it over the same defaults with the same check, into the struct the
// engine reads.
type sectionSpec struct {
	name, call string
	typ        reflect.Type
	shape      map[string]any     // its settings as a config's values (shapeOf)
	defaults   func(trl bool) any // a pointer to the call's defaults (TRL's with trl)
	check      func(p any) error  // validates *p, after folding in any shorthand
}

func newSection[T any](name, call string, defaults func(trl bool) T, check func(*T) error) *sectionSpec {
	return &sectionSpec{name: name, call: call, typ: reflect.TypeFor[T](), shape: shapeOf(reflect.TypeFor[T]()),
		defaults: func(trl bool) any { d := defaults(trl); return &d },
		check:    func(p any) error { return check(p.(*T)) }}
}

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
				return &ConfigError{Key: "adamw.betas", Value: o.Betas, Reason: "must be {beta1, beta2}"}
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
		return evalOptions{MaxNewTokens: rookworld.MaxAnswerTokens, Temperature: 1, Greedy: true, StopRule: rollout.StopRuleRookWorld,
			Reward: rookworld.DefaultRewardConfig()}
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

// read decodes v (nil or an option table) over the call's defaults and checks the result; it
// returns a pointer to the settings. path prefixes keys in messages ("grpo." for a config's
// section).
func (s *sectionSpec) read(v lua.LValue, path string) (any, error) {
	p := reflect.New(s.typ)
	t, _ := v.(*lua.LTable)
	if t != nil {
		if s.name == "grpo" || s.name == "sft" {
			if realTable(t).RawGetString("lr") != lua.LNil {
				return nil, &ConfigError{Key: path + "lr", Reason: "the learning rate is the optimizer's: adamw.lr (rook.adamw)"}
			}
		}
		t = realTable(t)
	}
	p.Elem().Set(reflect.ValueOf(s.defaults(t != nil && t.RawGetString("trl_compat") == lua.LTrue)).Elem())
	if err := decode(v, p.Interface(), path); err != nil {
		return nil, err
	}
	return p.Interface(), s.check(p.Interface())
}

// shapeOf is the settings of struct type t as a config's values: each a value of the Go type
// the setting takes (what a command line's text is read as), a group of settings a table.
func shapeOf(t reflect.Type) map[string]any {
	sc, out := schemaOf(t), map[string]any{}
	for _, name := range sc.names {
		if ft := sc.fields[name].typ; ft.Kind() == reflect.Struct {
			out[name] = shapeOf(ft)
		} else {
			out[name] = likeOf(ft)
		}
	}
	return out
}

// likeOf is a value of the Go type a setting of type t takes from a config: what parseAs
// parses its text as.
func likeOf(t reflect.Type) any {
	switch t.Kind() {
	case reflect.Bool:
		return false
	case reflect.String:
		return ""
	case reflect.Slice:
		return []any{likeOf(t.Elem())}
	}
	return 0.0
}

// defaultsOf is the defaults the calls of kind name decode over.
func defaultsOf[T any](name string) T { return *sectionNamed(name).defaults(false).(*T) }

// settingsArg reads argument n of call as the settings of the section called name, raising
// the call's error when they are not valid.
func settingsArg[T any](L *lua.LState, n int, name, call string) T {
	p, err := sectionNamed(name).read(L.Get(n), "")
	if err != nil {
		L.RaiseError("%s: %s", call, err.Error())
	}
	return *p.(*T)
}

// record is settings as a run's config.json keeps them: every setting, under its canonical
// name.
func record(p any) map[string]any {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // settings structs hold numbers, strings, booleans and lists
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}
