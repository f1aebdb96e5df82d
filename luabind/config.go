package luabind

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/rookscript/rookscript/internal/editdist"
	lua "github.com/yuin/gopher-lua"
)

// override is one key=value from the command line.
type override struct {
	key, raw string
}

var keyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// reservedKeys are accepted by every rook.config without being declared: config names a
// TOML file of values, resume a run directory to continue.
var reservedKeys = map[string]string{"config": "", "resume": ""}

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

// rook.config(defaults [, rules]) → the resolved config: defaults, then a TOML file
// (config=path, or the recipe's name with .toml beside it), then command-line overrides. A
// key that is not in the defaults, or a value of another type than its default, is an error
// naming the key and where it came from; an engine setting may be given under any of its
// names (kl_coef for beta). rules declare what each value must be (see checkRules), checked
// on the resolved values before the recipe does anything else. Every error here is a
// ConfigError: it names its key, without a Lua traceback.
func (e *Env) luaConfig(L *lua.LState) int {
	defaults := L.CheckTable(1)
	rules := L.OptTable(2, nil)
	g, err := toGo(defaults)
	if err != nil {
		L.ArgError(1, "config defaults: "+err.Error())
	}
	cfg, ok := g.(map[string]any)
	if !ok {
		L.ArgError(1, "config defaults must be a table of named values")
	}
	if err := finiteValues(cfg, ""); err != nil {
		raiseConfig(L, "config defaults: %s", err.Error())
	}
	if err := e.resolveConfig(cfg); err != nil {
		raiseConfig(L, "%s", err.Error())
	}
	if err := checkRules(L, cfg, rules); err != nil {
		raiseConfig(L, "%s", err.Error())
	}
	e.mu.Lock()
	e.config = cfg
	e.mu.Unlock()
	L.Push(fromGo(L, cfg))
	return 1
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
	tomlPath := ""
	for _, o := range e.args {
		if o.key == "config" {
			tomlPath = o.raw
			if _, err := os.Stat(tomlPath); err != nil {
				return fmt.Errorf("config=%s: %w", tomlPath, err)
			}
		}
	}
	if tomlPath == "" && e.opts.Recipe != "" {
		beside := strings.TrimSuffix(e.opts.Recipe, ".lua") + ".toml"
		if _, err := os.Stat(beside); err == nil {
			tomlPath = beside
		}
	}
	if tomlPath != "" {
		var file map[string]any
		if _, err := toml.DecodeFile(tomlPath, &file); err != nil {
			return fmt.Errorf("config file %s: %w", tomlPath, err)
		}
		if err := mergeTOML(cfg, file, tomlPath, ""); err != nil {
			return err
		}
		cfg["config"] = tomlPath
	}
	open := openTables(cfg, "", map[string]bool{})
	set := map[string]string{} // key set → the override that set it
	for _, o := range e.args {
		if _, reserved := reservedKeys[o.key]; reserved {
			cfg[o.key] = o.raw
			continue
		}
		key, err := applyOverride(cfg, o, open)
		if err != nil {
			return err
		}
		if prev, twice := set[key]; twice {
			return fmt.Errorf("override %s=%s: %s already set %q (the same setting)", o.key, o.raw, prev, key)
		}
		set[key] = o.key
	}
	return nil
}

// openTables finds the tables a recipe declared empty: open maps that take any key, for
// settings passed through to something else (ablate.lua's pass = {}). Their values keep the
// type they are written with.
func openTables(m map[string]any, prefix string, out map[string]bool) map[string]bool {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			if len(sub) == 0 {
				out[prefix+k] = true
			}
			openTables(sub, prefix+k+".", out)
		}
	}
	return out
}

// mergeTOML copies file's values into cfg, checking each key exists with the same type.
func mergeTOML(cfg, file map[string]any, src, prefix string) error {
	keys := make([]string, 0, len(file))
	for k := range file {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := prefix + k
		v := normalizeTOML(file[k])
		old, ok := cfg[k]
		if !ok {
			if declared, same := sameSetting(k, cfg); same {
				if _, both := file[declared]; both {
					return fmt.Errorf("config file %s: %q and %q name the same setting", src, k, declared)
				}
				k, name, old, ok = declared, prefix+declared, cfg[declared], true
			}
		}
		if !ok {
			if _, reserved := reservedKeys[k]; reserved && prefix == "" {
				cfg[k] = fmt.Sprint(file[k])
				continue
			}
			return fmt.Errorf("config file %s: unknown key %q%s", src, name, suggest(k, cfg))
		}
		if f, isNum := v.(float64); isNum && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return fmt.Errorf("config file %s: key %q: want a finite number, got %g", src, name, f)
		}
		if sub, isMap := old.(map[string]any); isMap && len(sub) == 0 {
			fm, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("config file %s: key %q must be a table, got %s", src, name, typeName(v))
			}
			cfg[k] = fm // an open table takes the file's keys as they are
			continue
		}
		if sub, isMap := old.(map[string]any); isMap {
			fm, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("config file %s: key %q must be a table, got %s", src, name, typeName(v))
			}
			if err := mergeTOML(sub, fm, src, name+"."); err != nil {
				return err
			}
			continue
		}
		if err := sameType(old, v); err != nil {
			return fmt.Errorf("config file %s: key %q: %w", src, name, err)
		}
		cfg[k] = v
	}
	return nil
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

// applyOverride sets a dotted key from its command-line text, parsed as its default's type
// (in an open table: as TOML if it is a TOML value, else as a string), and returns the key it
// set: the declared name when the override uses another name of the same engine setting.
func applyOverride(cfg map[string]any, o override, open map[string]bool) (string, error) {
	path := strings.Split(o.key, ".")
	m := cfg
	for i, p := range path[:len(path)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			return "", fmt.Errorf("override %s=%s: %q is not a table in the recipe's config%s", o.key, o.raw, strings.Join(path[:i+1], "."), suggest(p, m))
		}
		m = sub
	}
	last := path[len(path)-1]
	old, ok := m[last]
	if !ok {
		if declared, same := sameSetting(last, m); same {
			last, old, ok = declared, m[declared], true
		}
	}
	key := strings.Join(append(path[:len(path)-1:len(path)-1], last), ".")
	if !ok && len(path) > 1 && open[strings.Join(path[:len(path)-1], ".")] {
		var doc map[string]any
		if _, err := toml.Decode("v = "+o.raw, &doc); err == nil {
			m[last] = normalizeTOML(doc["v"])
		} else {
			m[last] = o.raw
		}
		return key, nil
	}
	if !ok {
		return "", fmt.Errorf("override %s=%s: unknown key %q%s", o.key, o.raw, o.key, suggest(last, m))
	}
	v, err := parseAs(old, o.raw)
	if err != nil {
		return "", fmt.Errorf("override %s=%s: %w", o.key, o.raw, err)
	}
	m[last] = v
	return key, nil
}

// parseAs parses text as a value of the same type as like.
func parseAs(like any, text string) (any, error) {
	switch like.(type) {
	case float64:
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("want a number, got %q", text)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
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
	// Tables: the value is written in TOML syntax, e.g. betas=[0.9,0.95].
	var doc map[string]any
	if _, err := toml.Decode("v = "+text, &doc); err != nil {
		return nil, fmt.Errorf("want a %s in TOML syntax (e.g. [1, 2]): %v", typeName(like), err)
	}
	v := normalizeTOML(doc["v"])
	if err := sameType(like, v); err != nil {
		return nil, err
	}
	return v, nil
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

// suggest proposes the closest known key to a misspelt one: a key of m, or another name of
// an engine setting m declares.
func suggest(key string, m map[string]any) string {
	known := make([]string, 0, len(m))
	for k := range m {
		known = append(known, k)
		known = append(known, otherNames(k)...)
	}
	return didYouMean(key, known)
}

func editDistance(a, b string) int { return editdist.Levenshtein(a, b) }
