package luabind

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/checkpoint"
	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/rollout"
)

// A recipe's config resolves once, here: its defaults, then a TOML file (config=PATH, or the
// recipe's name with .toml beside it) or, with resume=DIR, the config the run recorded; then
// the command line's key=value arguments. A key names a value of the recipe (steps), a
// setting of a section (grpo.beta), or a setting by its own name when one section has it
// (beta). Each section is then decoded over its engine call's defaults and validated; the
// recipe's own values are checked against its rules. Every error names its key.

type override struct{ key, raw string }

var keyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// reservedKeys are accepted by every rook.config without being declared: config names a
// TOML file of values, resume a run directory to continue.
var reservedKeys = map[string]bool{"config": true, "resume": true}

func parseOverrides(args []string) ([]override, error) {
	var out []override
	seen := map[string]bool{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || !keyPattern.MatchString(k) {
			return nil, fmt.Errorf("argument %q is not key=value", a)
		}
		if seen[k] {
			return nil, fmt.Errorf("key %q given twice on the command line", k)
		}
		seen[k] = true
		out = append(out, override{key: k, raw: v})
	}
	return out, nil
}

// rook.config(defaults [, rules]) → cfg: the recipe's values as a table, and each section
// (a key named after an engine call: grpo, rollout, adamw, reward, stockfish, eval, sft) as
// its resolved settings. A run_dir in the config is checked now, as rook.run would (a new run
// where checkpoints are, another process writing it), before the recipe loads anything.
func (e *Env) luaConfig(L *lua.LState) int {
	g, err := toGo(L.CheckTable(1))
	cfg, ok := g.(map[string]any)
	if err != nil || !ok {
		L.ArgError(1, fmt.Sprintf("config defaults must be a table of named values%s", errSuffix(err)))
	}
	if err := finiteValues(cfg, ""); err != nil {
		raiseConfig(L, "config defaults: %v", err)
	}
	for k, v := range cfg {
		if s := sectionNamed(k); s != nil {
			if _, ok := v.(map[string]any); !ok {
				raiseConfig(L, "config defaults: %s must be a table of %s's settings, got a %s", k, s.call, typeName(v))
			}
		}
	}
	if err := e.resolveConfig(cfg); err != nil {
		raiseConfig(L, "%v", err)
	}
	out, record, secs := L.NewTable(), map[string]any{}, map[string]*section{}
	for _, k := range sortedKeys(cfg) {
		s := sectionNamed(k)
		if s == nil {
			out.RawSetString(k, fromGo(L, cfg[k]))
			record[k] = cfg[k]
			continue
		}
		sec, err := newSectionValue(L, s, fromGo(L, cfg[k]).(*lua.LTable))
		if err != nil {
			raiseConfig(L, "config: %v", err)
		}
		out.RawSetString(k, newUserData(L, sectionType, sec))
		record[k], secs[k] = sec.record(), sec
	}
	// Sections that run together: a GRPO step compares the groups its rollouts draw.
	if secs["grpo"] != nil && secs["rollout"] != nil {
		if err := grpo.CheckGroup(secs["rollout"].live.Interface().(*rollout.Config).Group); err != nil {
			raiseConfig(L, "config: rollout.group: %v", err)
		}
	}
	fixed, err := checkRules(L, e.guard, cfg, L.OptTable(2, nil))
	if err != nil {
		raiseConfig(L, "%v", err)
	}
	if e.resume != nil && !e.resume.applied {
		if err := e.resume.checkFixed(fixed); err != nil {
			raiseConfig(L, "%v", err)
		}
		e.resume.report(e) // what the resume changes, once the config is accepted
	}
	// A folder of runs (an ablation's arms) is the recipe's to read and write, as a run
	// directory is. Each is granted only once every check has passed: a refused setting
	// grants nothing, even to a recipe that catches the refusal.
	var grants []func()
	if dir, _ := cfg["base_dir"].(string); dir != "" {
		grant, err := e.runDirGrant(dir, grantRuns)
		if err != nil {
			raiseConfig(L, "base_dir=%s: %v", dir, err)
		}
		grants = append(grants, grant)
	}
	if dir, _ := cfg["run_dir"].(string); dir != "" {
		resume, _ := cfg["resume"].(string)
		if resume != "" {
			dir = resume
		}
		// A resume says first whether it names a run; a new run, whether it may be written.
		preflight := func() {
			if err := checkpoint.Preflight(dir, resume != ""); err != nil {
				raiseConfig(L, "run_dir=%s: %v", dir, err)
			}
		}
		if resume != "" {
			preflight()
		}
		grant, err := e.runDirGrant(dir, grantRun)
		if err != nil {
			raiseConfig(L, "run_dir=%s: %v", dir, err)
		}
		if resume == "" {
			preflight()
		}
		grants = append(grants, grant)
	}
	for _, grant := range grants {
		grant()
	}
	e.mu.Lock()
	e.config = record
	e.mu.Unlock()
	L.Push(out)
	return 1
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// finiteValues reports a NaN or infinite number anywhere in m: no setting takes one, and a
// run's config.json could not record it.
func finiteValues(m map[string]any, prefix string) error {
	for k, v := range m {
		switch x := v.(type) {
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("key %q: want a finite number, got %g", prefix+k, x)
			}
		case map[string]any:
			if err := finiteValues(x, prefix+k+"."); err != nil {
				return err
			}
		case []any:
			for i, e := range x {
				if f, ok := e.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
					return fmt.Errorf("key %q element %d: want a finite number, got %g", prefix+k, i+1, f)
				}
			}
		}
	}
	return nil
}

func (e *Env) resolveConfig(cfg map[string]any) error {
	if resumed, err := e.resumeConfig(cfg); resumed || err != nil {
		return err
	}
	path := ""
	for _, o := range e.args {
		if o.key == "config" {
			path = o.raw
		}
	}
	if path == "" && e.opts.Recipe != "" {
		if beside := strings.TrimSuffix(e.opts.Recipe, ".lua") + ".toml"; fileExists(beside) {
			path = beside
		}
	}
	if path != "" {
		if err := mergeFile(cfg, path); err != nil {
			return err
		}
	}
	return e.applyOverrides(cfg, nil)
}

// mergeFile puts a TOML file's values over cfg.
func mergeFile(cfg map[string]any, path string) error {
	var file map[string]any
	if _, err := toml.DecodeFile(path, &file); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	values := normalizeTOML(file).(map[string]any)
	if err := finiteValues(values, ""); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if err := merge(cfg, values, "", "config file "+path); err != nil {
		return err
	}
	cfg["config"] = path
	return nil
}

// applyOverrides applies the command line's key=value arguments (but resume and config),
// each key once, calling seen for every key it sets.
func (e *Env) applyOverrides(cfg map[string]any, seen func(o override) error) error {
	open := openTables(cfg, "", map[string]bool{})
	set := map[string]override{}
	for _, o := range e.args {
		if reservedKeys[o.key] {
			cfg[o.key] = o.raw
			continue
		}
		if seen != nil {
			if err := seen(o); err != nil {
				return err
			}
		}
		key, err := applyOverride(cfg, o, open)
		if err != nil {
			return fmt.Errorf("override %s=%s: %w", o.key, o.raw, err)
		}
		if prev, twice := set[key]; twice {
			return fmt.Errorf("%s=%s and %s=%s both set %s (one setting by two names): give it once", prev.key, prev.raw, o.key, o.raw, key)
		}
		set[key] = o
	}
	return nil
}

// openTables finds the tables a recipe declared empty, outside sections: open maps that take
// any key, for settings passed through to something else (ablate.lua's pass = {}).
func openTables(m map[string]any, prefix string, out map[string]bool) map[string]bool {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok && (prefix != "" || sectionNamed(k) == nil) {
			if len(sub) == 0 {
				out[prefix+k] = true
			}
			openTables(sub, prefix+k+".", out)
		}
	}
	return out
}

// merge puts src's values over dst (a config, or a table in it at prefix). A key of the
// recipe keeps its type; a section takes any of its settings (checked when it is decoded);
// a setting's own name at the top reaches its section.
func merge(dst, src map[string]any, prefix, origin string) error {
	for _, k := range sortedKeys(src) {
		v, name := src[k], prefix+k
		old, declared := dst[k]
		switch sub, isMap := old.(map[string]any); {
		case prefix == "" && sectionNamed(k) != nil && declared:
			vm, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: %s must be a table of settings, got a %s", origin, k, typeName(v))
			}
			mergeLoose(sub, vm)
		case prefix == "" && !declared && reservedKeys[k]:
			dst[k] = fmt.Sprint(v)
		case prefix == "" && !declared:
			at, err := findSetting(dst, k)
			if err != nil {
				return fmt.Errorf("%s: %w", origin, err)
			}
			setAt(dst, at, v)
		case !declared:
			return fmt.Errorf("%s: unknown key %q%s", origin, name, didYouMean(k, sortedKeys(dst)))
		case isMap && len(sub) == 0:
			if _, ok := v.(map[string]any); !ok {
				return fmt.Errorf("%s: key %q must be a table, got a %s", origin, name, typeName(v))
			}
			dst[k] = v // an open table takes the keys as they are
		case isMap:
			vm, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: key %q must be a table, got a %s", origin, name, typeName(v))
			}
			if err := merge(sub, vm, name+".", origin); err != nil {
				return err
			}
		default:
			if err := sameType(old, v); err != nil {
				return fmt.Errorf("%s: key %q: %w", origin, name, err)
			}
			dst[k] = v
		}
	}
	return nil
}

// mergeLoose puts src over dst, tables into tables.
func mergeLoose(dst, src map[string]any) {
	for k, v := range src {
		sub, ok1 := dst[k].(map[string]any)
		vm, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			mergeLoose(sub, vm)
		} else {
			dst[k] = v
		}
	}
}

// findSetting is the path of the one section setting called key among the config's sections:
// {"grpo", "beta"} for beta. An old name is refused with the new one; a name several sections
// share must be written with its section.
func findSetting(cfg map[string]any, key string) ([]string, error) {
	var found [][]string
	for _, s := range sectionSpecs {
		if _, declared := cfg[s.name]; !declared {
			continue
		}
		var walk func(t reflect.Type, at []string) error
		walk = func(t reflect.Type, at []string) error {
			sc := schemaOf(t)
			if c, ok := sc.renamed[key]; ok {
				return fmt.Errorf("%s is now %s", key, strings.Join(append(at, c), "."))
			}
			if c, err := sc.canonical(key, ""); err == nil {
				found = append(found, append(at[:len(at):len(at)], c))
			}
			for _, name := range sc.names {
				if f := sc.fields[name]; f.typ.Kind() == reflect.Struct {
					if err := walk(f.typ, append(at[:len(at):len(at)], name)); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if err := walk(s.typ, []string{s.name}); err != nil {
			return nil, err
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		known := sortedKeys(cfg) // a bare name may be the recipe's or a section's setting
		for _, s := range sectionSpecs {
			if _, declared := cfg[s.name]; declared {
				known = append(known, schemaOf(s.typ).known()...)
			}
		}
		return nil, fmt.Errorf("unknown key %q%s", key, didYouMean(key, known))
	}
	var names []string
	for _, f := range found {
		names = append(names, strings.Join(f, "."))
	}
	return nil, fmt.Errorf("%q is a setting of several sections: write %s", key, strings.Join(names, " or "))
}

// setAt stores v at a path of tables, making the tables it lacks.
func setAt(m map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	m[path[len(path)-1]] = v
}

// applyOverride sets the value a key=value argument names, parsed as that value's type, and
// returns the key it set (its canonical dotted name).
func applyOverride(cfg map[string]any, o override, open map[string]bool) (string, error) {
	path := strings.Split(o.key, ".")
	if _, declared := cfg[path[0]]; !declared && len(path) == 1 {
		at, err := findSetting(cfg, path[0])
		if err != nil {
			return "", err
		}
		path = at
	}
	if s := sectionNamed(path[0]); s != nil {
		if _, declared := cfg[path[0]]; !declared {
			return "", fmt.Errorf("this recipe has no %s section", path[0])
		}
		if len(path) == 1 {
			return "", fmt.Errorf("%s is a section: set one of its settings (%s.KEY=VALUE)", path[0], path[0])
		}
		{
			t, canon := s.typ, []string{path[0]}
			for i, p := range path[1:] {
				if t.Kind() != reflect.Struct {
					return "", fmt.Errorf("%s is not a table of settings", strings.Join(canon, "."))
				}
				c, err := schemaOf(t).canonical(p, strings.Join(canon, ".")+".")
				if err != nil {
					return "", err
				}
				canon, t = append(canon, c), schemaOf(t).fields[c].typ
				if i == len(path)-2 && t.Kind() == reflect.Struct {
					return "", fmt.Errorf("%s is a table of settings: set one of them", strings.Join(canon, "."))
				}
			}
			v, err := parseAs(likeOf(t), o.raw)
			if err != nil {
				return "", err
			}
			setAt(cfg, canon, v)
			return strings.Join(canon, "."), nil
		}
	}
	m, inOpen := cfg, false
	for i, p := range path[:len(path)-1] {
		inOpen = inOpen || open[strings.Join(path[:i], ".")]
		sub, ok := m[p].(map[string]any)
		if !ok && inOpen && m[p] == nil {
			sub, ok = map[string]any{}, true // an open table takes nested keys too
			m[p] = sub
		}
		if !ok {
			return "", fmt.Errorf("%q is not a table in the recipe's config%s", strings.Join(path[:i+1], "."), didYouMean(p, sortedKeys(m)))
		}
		m = sub
	}
	last := path[len(path)-1]
	old, ok := m[last]
	switch {
	case !ok && len(path) > 1 && (inOpen || open[strings.Join(path[:len(path)-1], ".")]):
		var doc map[string]any
		if _, err := toml.Decode("v = "+o.raw, &doc); err == nil {
			m[last] = normalizeTOML(doc["v"])
		} else {
			m[last] = o.raw
		}
	case !ok:
		return "", fmt.Errorf("unknown key %q%s", o.key, didYouMean(last, sortedKeys(m)))
	default:
		v, err := parseAs(old, o.raw)
		if err != nil {
			return "", err
		}
		m[last] = v
	}
	return strings.Join(path, "."), nil
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
	case reflect.Struct:
		return map[string]any{}
	}
	return 0.0
}

// parseAs parses text as a value of the same type as like; a list or a table is written in
// TOML syntax (betas=[0.9,0.95]).
func parseAs(like any, text string) (any, error) {
	switch like.(type) {
	case float64:
		f, err := strconv.ParseFloat(text, 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			return nil, fmt.Errorf("want a number, got %q", text)
		case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
			return nil, fmt.Errorf("want a finite number, got %q", text)
		}
		return f, nil
	case bool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return nil, fmt.Errorf("want true or false, got %q", text)
		}
		return b, nil
	case string:
		return text, nil
	}
	var doc map[string]any
	if _, err := toml.Decode("v = "+text, &doc); err != nil {
		return nil, fmt.Errorf("want a %s in TOML syntax (e.g. [1, 2]): %v", typeName(like), err)
	}
	v := normalizeTOML(doc["v"])
	return v, sameType(like, v)
}

func sameType(like, v any) error {
	if typeName(like) != typeName(v) {
		return fmt.Errorf("want a %s like the recipe's default, got a %s", typeName(like), typeName(v))
	}
	if la, ok := like.([]any); ok && len(la) > 0 {
		for i, e := range v.([]any) {
			if typeName(e) != typeName(la[0]) {
				return fmt.Errorf("element %d: want a %s, got a %s", i+1, typeName(la[0]), typeName(e))
			}
		}
	}
	return nil
}

func typeName(v any) string {
	switch v.(type) {
	case float64:
		return "number"
	case string:
		return "string"
	case bool:
		return "boolean"
	case []any:
		return "list"
	case map[string]any:
		return "table"
	case nil:
		return "nil"
	}
	return fmt.Sprintf("%T", v)
}

// normalizeTOML turns TOML's decoded values into toGo's shapes (float64, []any, map).
func normalizeTOML(v any) any {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeTOML(e)
		}
		return out
	case []map[string]any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalizeTOML(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalizeTOML(e)
		}
		return out
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
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
	L.Error(newUserData(L, configErrorType, &ConfigError{Msg: msg}), 1)
}
