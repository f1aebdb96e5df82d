package luabind

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/checkpoint"
	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/rollout"
	"github.com/rookscript/rookscript/engine/rookworld"
	"github.com/rookscript/rookscript/engine/stockfish"
)

// A settingGroup is the option struct of one Lua call. A recipe's flat config carries the
// settings of every group under one name each: rook.config accepts any name of a setting (an
// alias such as kl_coef for beta) for the name the recipe declared, rook.settings(cfg, group)
// takes the config apart into the calls' option tables, and rook.check{group = opts} reads
// an option table as its call will.
type settingGroup struct {
	name string       // the group's name in rook.settings and rook.check
	call string       // the Lua call whose options these are, for messages
	typ  reflect.Type // the config struct
	// qualified: a flat config names these settings by their aliases only
	// (stockfish_depth), since the bare names (depth, threads, path) mean other things in a
	// recipe. The call itself takes both.
	qualified bool
	extra     []string // the call's keys that are not settings (betas, engine)
	// perCall are settings a flat config does not carry: a recipe derives them for each
	// call (a rollout's seed, from its own seed and the step).
	perCall []string
	// of lists the groups whose settings these are, by the same names: the group
	// combines them for one call and names nothing new.
	of []string
	// check reads t as the call does and validates it; m, when not nil, is the model the
	// options are for.
	check func(t *lua.LTable, m *model) error
}

var settingGroups = []*settingGroup{
	{name: "grpo", call: "rook.grpo.step", typ: reflect.TypeFor[grpo.Config](),
		check: func(t *lua.LTable, _ *model) error { _, err := grpoOptions(t); return err }},
	{name: "rollout", call: "policy:rollout", typ: reflect.TypeFor[rollout.Config](), perCall: []string{"seed"}, check: checkRollout},
	{name: "adamw", call: "rook.adamw", typ: reflect.TypeFor[adamwOptions](), extra: []string{"betas"},
		check: func(t *lua.LTable, _ *model) error { _, err := readAdamW(t); return err }},
	{name: "reward", call: "rook.reward.chess", typ: reflect.TypeFor[rookworld.RewardConfig](), extra: []string{"engine"},
		check: func(t *lua.LTable, _ *model) error { _, _, err := rewardOptions(t); return err }},
	{name: "stockfish", call: "rook.stockfish", typ: reflect.TypeFor[stockfish.Config](), qualified: true,
		check: func(t *lua.LTable, _ *model) error { _, err := stockfishOptions(t); return err }},
	{name: "eval", call: "rook.eval", typ: reflect.TypeFor[evalOptions](), extra: []string{"engine"}, perCall: []string{"seed"},
		of: []string{"rollout", "reward"}, check: checkEval},
}

// group returns the setting group called name, or nil.
func group(name string) *settingGroup {
	for _, g := range settingGroups {
		if g.name == name {
			return g
		}
	}
	return nil
}

func groupNames() []string {
	out := make([]string, len(settingGroups))
	for i, g := range settingGroups {
		out[i] = g.name
	}
	return out
}

// flatCanonical returns the canonical name of the setting a flat config's key names.
func (g *settingGroup) flatCanonical(key string) (string, bool) {
	s := schemaOf(g.typ)
	c, ok := s.canonical(key)
	if g.qualified {
		c, ok = s.alias[key]
	}
	if slices.Contains(g.perCall, c) {
		return "", false
	}
	return c, ok
}

// flatNames lists the names a flat config may give the setting called canonical.
func (g *settingGroup) flatNames(canonical string) []string {
	f := schemaOf(g.typ).fields[canonical]
	switch {
	case slices.Contains(g.perCall, canonical):
		return nil
	case g.qualified:
		return f.aliases
	}
	return append([]string{canonical}, f.aliases...)
}

func checkRollout(t *lua.LTable, m *model) error {
	c := rollout.Config{Group: 8, MaxNewTokens: 128, Temperature: 1}
	err := decodeOptions(t, &c)
	if err == nil {
		err = c.Validate()
	}
	if err == nil && m != nil {
		err = c.ValidateContext(m.m.Config.MaxSeqLen)
	}
	if err != nil {
		return errors.New(bare(err, "rollout"))
	}
	return nil
}

func checkEval(t *lua.LTable, m *model) error {
	c, _, _, err := readEval(t)
	if err == nil && m != nil {
		if err = c.ValidateContext(m.m.Config.MaxSeqLen); err != nil {
			err = errors.New(bare(err, "rollout"))
		}
	}
	return err
}

// sameSetting returns the key of m that names the same engine setting as key under another
// of its names (canonical or alias).
func sameSetting(key string, m map[string]any) (string, bool) {
	for _, g := range settingGroups {
		c, ok := g.flatCanonical(key)
		if !ok {
			continue
		}
		for _, name := range g.flatNames(c) {
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
	for _, g := range settingGroups {
		if c, ok := g.flatCanonical(key); ok {
			for _, name := range g.flatNames(c) {
				if name != key && !slices.Contains(out, name) {
					out = append(out, name)
				}
			}
		}
	}
	return out
}

// rook.settings(cfg, group [, opts]) → the option table of one call taken from a recipe's
// flat config: the entries of cfg that are settings of group ("grpo" for rook.grpo.step,
// "rollout" for policy:rollout, "adamw", "reward" for rook.reward.chess, "stockfish", "eval"
// for rook.eval), under their canonical names, then the entries of opts over them. So a
// recipe spells each setting once, in its rook.config defaults:
//
//	local update = rook.settings(cfg, "grpo")    -- beta, epsilon, loss_type, ... as cfg has them
//	local sf = rook.stockfish(rook.settings(cfg, "stockfish", { workers = 2 }))
//
// A flat config names the Stockfish pool's settings by their recipe names (stockfish_depth,
// stockfish for the binary), and carries no rollout seed (a recipe derives one per call from
// its own seed). The result is an ordinary option table that the call (or
// rook.check) reads strictly; opts is checked here: a key that is not the group's is an
// error naming it, and so is a setting cfg gives under two of its names.
func luaSettings(L *lua.LState) int {
	cfg := L.CheckTable(1)
	name := L.CheckString(2)
	g := group(name)
	if g == nil {
		L.ArgError(2, fmt.Sprintf("unknown setting group %q%s (one of %s)", name, didYouMean(name, groupNames()), strings.Join(groupNames(), ", ")))
	}
	opts := L.OptTable(3, nil)
	s := schemaOf(g.typ)

	from := map[string][]string{} // canonical name (or extra key) → the keys of cfg giving it
	cfg.ForEach(func(k, _ lua.LValue) {
		ks, ok := k.(lua.LString)
		if !ok {
			return
		}
		if c, ok := g.flatCanonical(string(ks)); ok {
			from[c] = append(from[c], string(ks))
		} else if slices.Contains(g.extra, string(ks)) {
			from[string(ks)] = append(from[string(ks)], string(ks))
		}
	})
	out := L.NewTable()
	for _, c := range sortedKeys(from) {
		keys := from[c]
		if len(keys) > 1 {
			slices.Sort(keys)
			raiseConfig(L, "rook.settings: the config gives %s's setting %q twice, as %s", g.call, c, quoteList(keys))
		}
		out.RawSetString(c, copyValue(cfg.RawGetString(keys[0])))
	}
	if opts != nil {
		var keys []string
		bad := ""
		opts.ForEach(func(k, _ lua.LValue) {
			ks, ok := k.(lua.LString)
			if !ok {
				bad = k.String()
				return
			}
			keys = append(keys, string(ks))
		})
		if bad != "" {
			L.ArgError(3, "option keys are names, got "+bad)
		}
		slices.Sort(keys)
		given := map[string]string{}
		for _, k := range keys {
			c, ok := s.canonical(k)
			if !ok && !slices.Contains(g.extra, k) {
				L.ArgError(3, fmt.Sprintf("%q is not an option of %s%s", k, g.call, didYouMean(k, append(s.known(), g.extra...))))
			}
			if !ok {
				c = k
			}
			if prev, twice := given[c]; twice {
				L.ArgError(3, fmt.Sprintf("option %q is given twice, as %q and %q", c, prev, k))
			}
			given[c] = k
			out.RawSetString(c, opts.RawGetString(k))
		}
	}
	L.Push(out)
	return 1
}

// copyValue returns v, with a table copied so that changing the result leaves the config
// alone.
func copyValue(v lua.LValue) lua.LValue {
	t, ok := v.(*lua.LTable)
	if !ok {
		return v
	}
	out := &lua.LTable{}
	t.ForEach(func(k, e lua.LValue) { out.RawSet(k, copyValue(e)) })
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

// rook.check{grpo = opts, rollout = opts, adamw = opts, reward = opts, stockfish = opts,
// eval = opts [, model = policy]} validates option tables as rook.grpo.step, policy:rollout,
// rook.adamw, rook.reward.chess, rook.stockfish and rook.eval read them, so a recipe can
// refuse a bad setting before it starts any expensive work. With model, the rollout's and
// the evaluation's max_new_tokens are also checked against the model's context. A bad value
// raises an error naming its key.
func luaCheck(L *lua.LState) int {
	t := L.CheckTable(1)
	known := append(groupNames(), "model", "run")
	t.ForEach(func(k, _ lua.LValue) {
		if !slices.Contains(known, k.String()) {
			raiseConfig(L, "rook.check: unknown option set %q%s", k.String(), didYouMean(k.String(), known))
		}
	})
	var m *model
	if t.RawGetString("model") != lua.LNil {
		m = checkModelField(L, t)
	}
	for _, g := range settingGroups {
		var o *lua.LTable
		switch v := t.RawGetString(g.name).(type) {
		case *lua.LNilType:
			continue
		case *lua.LTable:
			o = v
		default:
			raiseConfig(L, "rook.check: %s must be an option table, got a %s", g.name, v.Type())
		}
		if err := g.check(o, m); err != nil {
			raiseConfig(L, "rook.check: %s: %s", g.call, bare(err, g.name))
		}
	}
	if v := t.RawGetString("run"); v != lua.LNil {
		checkRunSet(L, v)
	}
	return 0
}

// checkRunSet is rook.check's run set, { dir =, resume = }: the refusals rook.run would give
// for the directory as it is now (checkpoints where a new run would start, no run to resume,
// another writer), before a recipe loads or builds its model.
func checkRunSet(L *lua.LState, v lua.LValue) {
	o, ok := v.(*lua.LTable)
	if !ok {
		raiseConfig(L, "rook.check: run must be an option table, got a %s", v.Type())
	}
	var set struct {
		Dir    string `json:"dir"`
		Resume bool   `json:"resume"`
	}
	if err := decodeOptions(o, &set); err != nil {
		raiseConfig(L, "rook.check: run: %v", err)
	}
	if set.Dir == "" {
		raiseConfig(L, "rook.check: run: dir is missing")
	}
	if err := checkpoint.Preflight(set.Dir, set.Resume); err != nil {
		raiseConfig(L, "rook.check: rook.run: %v", err)
	}
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
