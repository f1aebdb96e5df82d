package luabind

import (
	"bytes"
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
// — the run's, when a resume restored them (engineSettings) — and checks the result; it
// returns a pointer to the settings. path prefixes keys in messages ("grpo." for a config's
// section).
func (s *sectionSpec) read(L *lua.LState, v lua.LValue, path string) (any, error) {
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
	p, err := settingsOf(L).defaults(s, t != nil && t.RawGetString("trl_compat") == lua.LTrue)
	if err != nil {
		return nil, err
	}
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
// the call's error when they are not valid, and records them as the settings of the last call
// of that kind (engineSettings).
func settingsArg[T any](L *lua.LState, n int, name, call string) T {
	s := sectionNamed(name)
	p, err := s.read(L, L.Get(n), "")
	if err != nil {
		L.RaiseError("%s: %s", call, err.Error())
	}
	settingsOf(L).use(s, call, p)
	return *p.(*T)
}

// newSectionValue resolves a section from the table a config gives it.
func newSectionValue(L *lua.LState, s *sectionSpec, t *lua.LTable) (*section, error) {
	p, err := s.read(L, t, s.name+".")
	if err != nil {
		return nil, err
	}
	settingsOf(L).resolved(s, "the config's "+s.name+" section")
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

// engineSettings is an environment's record of the engine settings its calls use, beyond what
// its config records (DESIGN §6.7). A call given a table takes the settings the table names
// over its kind's defaults, and a binary's defaults may change between a run's start and its
// resume. So a run's checkpoints record the defaults its calls decode over, and a resume
// restores them (rook.config with resume=DIR, before any call; else rook.run): a setting the
// recipe never names keeps the value the run started with, and every difference from this
// binary's is printed. The values a recipe names — the KL warm-up's β each step — come from
// the recipe as always; nothing restored overrides them. The record also keeps each kind of
// call's settings as last used, for whoever reads the checkpoint.
type engineSettings struct {
	rec      settingsRecord
	restored string            // the checkpoint the defaults were restored from; "" while they are this binary's
	early    map[string]string // kind → the first call that decoded over this binary's defaults before a restore

	unrecorded string // the checkpoint said to have no record of its defaults
}

// settingsRecord is engineSettings as a checkpoint keeps it (checkpoint.State.Settings).
type settingsRecord struct {
	Defaults    map[string]json.RawMessage `json:"defaults"`               // kind → the defaults of its calls' unnamed settings
	TRLDefaults map[string]json.RawMessage `json:"trl_defaults,omitempty"` // the same with trl_compat = true, where they differ
	Used        map[string]json.RawMessage `json:"used"`                   // kind → the settings of its last call
}

// settingsKey is where an environment's engineSettings lives in the Lua registry.
const settingsKey = "rookscript/settings"

// settingsOf is the environment's engineSettings.
func settingsOf(L *lua.LState) *engineSettings {
	if ud, ok := L.G.Registry.RawGetString(settingsKey).(*lua.LUserData); ok {
		return ud.Value.(*engineSettings)
	}
	d, trl := binaryDefaults()
	es := &engineSettings{rec: settingsRecord{Defaults: d, TRLDefaults: trl, Used: map[string]json.RawMessage{}}, early: map[string]string{}}
	ud := L.NewUserData()
	ud.Value = es
	L.G.Registry.RawSetString(settingsKey, ud)
	return es
}

// binaryDefaults are this binary's defaults of every kind of call, and with trl_compat those
// that differ.
func binaryDefaults() (defaults, trl map[string]json.RawMessage) {
	defaults, trl = map[string]json.RawMessage{}, map[string]json.RawMessage{}
	for _, s := range sectionSpecs {
		d, t := mustJSON(s.defaults(false)), mustJSON(s.defaults(true))
		defaults[s.name] = d
		if !bytes.Equal(d, t) {
			trl[s.name] = t
		}
	}
	return defaults, trl
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // settings structs hold numbers, strings, booleans and lists
	}
	return b
}

// defaults returns a pointer to the defaults a call of kind s decodes over.
func (es *engineSettings) defaults(s *sectionSpec, trl bool) (any, error) {
	p := s.defaults(trl)
	if es.restored == "" {
		return p, nil
	}
	raw, ok := es.rec.TRLDefaults[s.name]
	if !trl || !ok {
		raw = es.rec.Defaults[s.name]
	}
	if err := json.Unmarshal(raw, p); err != nil {
		return nil, fmt.Errorf("the %s defaults %s recorded: %w", s.name, es.restored, err)
	}
	return p, nil
}

// defaultsOf is the defaults the calls of kind name decode over.
func defaultsOf[T any](L *lua.LState, name string) T {
	p, err := settingsOf(L).defaults(sectionNamed(name), false)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	return *p.(*T)
}

// use records p as the settings of the last call of kind s.
func (es *engineSettings) use(s *sectionSpec, call string, p any) {
	es.rec.Used[s.name] = mustJSON(p)
	es.resolved(s, call)
}

// resolved notes that settings of kind s were decoded over this binary's defaults, unless the
// run's are restored already.
func (es *engineSettings) resolved(s *sectionSpec, what string) {
	if _, seen := es.early[s.name]; !seen && es.restored == "" {
		es.early[s.name] = what
	}
}

// record is what a checkpoint stores.
func (es *engineSettings) record() json.RawMessage { return mustJSON(es.rec) }

// restore makes the defaults a checkpoint recorded those of every later call, and returns what
// differs from this binary's, one line each. A checkpoint written before defaults were recorded
// (raw nil) leaves this binary's, and says so. Once restored, the defaults of another run that
// differ are refused: one environment decodes with one set.
func (es *engineSettings) restore(raw json.RawMessage, from string) ([]string, error) {
	if raw == nil {
		if es.unrecorded == from {
			return nil, nil
		}
		es.unrecorded = from
		return []string{fmt.Sprintf("%s records no engine defaults (saved by a rookscript that did not record them): settings a call does not name take this rookscript's defaults", from)}, nil
	}
	var rec settingsRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("%s: recorded settings: %w", from, err)
	}
	if rec.Defaults == nil {
		return nil, fmt.Errorf("%s: recorded settings without their defaults", from)
	}
	same := bytes.Equal(mustJSON([]any{rec.Defaults, rec.TRLDefaults}), mustJSON([]any{es.rec.Defaults, es.rec.TRLDefaults}))
	if es.restored != "" {
		if !same {
			return nil, fmt.Errorf("%s recorded engine defaults that differ from those of %s, which this environment's calls use: resume each run in its own process (rook.exec)", from, es.restored)
		}
		es.keepUsed(rec.Used)
		return nil, nil
	}
	var notes []string
	if !same {
		for _, s := range sectionSpecs {
			d := defaultsDiff(es.rec, rec, s.name)
			if len(d) == 0 {
				continue
			}
			if early, ok := es.early[s.name]; ok {
				var list []string
				for _, c := range d {
					list = append(list, c.String())
				}
				notes = append(notes, fmt.Sprintf("warning: %s decoded its settings over this rookscript's defaults before the resume restored the run's, which differ (%s), and keeps them; resume with resume=DIR on the command line, so that rook.config restores them before any call",
					early, strings.Join(list, "; ")))
				continue
			}
			for _, c := range d {
				line := "engine default " + c.String()
				if c.run != "" && c.now != "" {
					line += " (the run keeps its own)"
				}
				notes = append(notes, line)
			}
		}
	}
	// Kinds this binary has and the record lacks keep this binary's defaults.
	for k, v := range rec.Defaults {
		es.rec.Defaults[k] = v
	}
	for k, v := range rec.TRLDefaults {
		es.rec.TRLDefaults[k] = v
	}
	es.keepUsed(rec.Used)
	es.restored = from
	return notes, nil
}

// keepUsed takes the recorded last settings of the kinds this environment has not called yet.
func (es *engineSettings) keepUsed(used map[string]json.RawMessage) {
	for k, v := range used {
		if _, ok := es.rec.Used[k]; !ok {
			es.rec.Used[k] = v
		}
	}
}

// defaultChange is a setting whose default differs between a run's record and this binary:
// run "" for a setting new since the run started, now "" for one this binary lacks.
type defaultChange struct{ name, run, now string }

func (c defaultChange) String() string {
	switch {
	case c.run == "":
		return fmt.Sprintf("%s: new since the run started, this rookscript's %s", c.name, c.now)
	case c.now == "":
		return fmt.Sprintf("%s: the run's %s is not a setting of this rookscript", c.name, c.run)
	}
	return fmt.Sprintf("%s: the run's %s, this rookscript's %s", c.name, c.run, c.now)
}

// defaultsDiff lists the settings of kind whose default differs between this binary (now)
// and a run's record (rec), TRL's defaults as "grpo (trl_compat).epsilon" where they differ
// otherwise.
func defaultsDiff(now, rec settingsRecord, kind string) []defaultChange {
	var out []defaultChange
	listed := map[defaultChange]bool{} // by setting, without the label
	for _, v := range []struct {
		label    string
		now, rec map[string]json.RawMessage
	}{{kind, now.Defaults, rec.Defaults}, {kind + " (trl_compat)", now.TRLDefaults, rec.TRLDefaults}} {
		a, b := v.now[kind], v.rec[kind]
		if a == nil || b == nil || bytes.Equal(a, b) {
			continue
		}
		nm, rm := map[string]string{}, map[string]string{}
		flattenJSON(a, "", nm)
		flattenJSON(b, "", rm)
		for k := range nm {
			if _, ok := rm[k]; !ok {
				rm[k] = ""
			}
		}
		for _, k := range sortedKeys(rm) {
			if c := (defaultChange{k, rm[k], nm[k]}); c.run != c.now && !listed[c] {
				listed[c] = true
				c.name = v.label + "." + k
				out = append(out, c)
			}
		}
	}
	return out
}

// flattenJSON writes an object's leaves under their dotted names, as JSON text.
func flattenJSON(raw json.RawMessage, prefix string, out map[string]string) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		out[strings.TrimSuffix(prefix, ".")] = string(raw)
		return
	}
	for k, v := range m {
		if len(v) > 0 && v[0] == '{' {
			flattenJSON(v, prefix+k+".", out)
			continue
		}
		out[prefix+k] = string(v)
	}
}
