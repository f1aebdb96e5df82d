package luabind

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
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

// rook.config(defaults) → the resolved config: defaults, then a TOML file (config=path, or
// the recipe's name with .toml beside it), then command-line overrides. A key that is not
// in the defaults, or a value of another type than its default, is an error naming the key
// and where it came from.
func (e *Env) luaConfig(L *lua.LState) int {
	defaults := L.CheckTable(1)
	g, err := toGo(defaults)
	if err != nil {
		L.ArgError(1, "config defaults: "+err.Error())
	}
	cfg, ok := g.(map[string]any)
	if !ok {
		L.ArgError(1, "config defaults must be a table of named values")
	}
	if err := e.resolveConfig(cfg); err != nil {
		L.RaiseError("%s", err.Error())
	}
	e.mu.Lock()
	e.config = cfg
	e.mu.Unlock()
	L.Push(fromGo(L, cfg))
	return 1
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
	for _, o := range e.args {
		if _, reserved := reservedKeys[o.key]; reserved {
			cfg[o.key] = o.raw
			continue
		}
		if err := applyOverride(cfg, o, open); err != nil {
			return err
		}
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
		old, ok := cfg[k]
		if !ok {
			if _, reserved := reservedKeys[k]; reserved && prefix == "" {
				cfg[k] = fmt.Sprint(file[k])
				continue
			}
			return fmt.Errorf("config file %s: unknown key %q%s", src, name, suggest(k, cfg))
		}
		v := normalizeTOML(file[k])
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
// (in an open table: as TOML if it is a TOML value, else as a string).
func applyOverride(cfg map[string]any, o override, open map[string]bool) error {
	path := strings.Split(o.key, ".")
	m := cfg
	for i, p := range path[:len(path)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			return fmt.Errorf("override %s=%s: %q is not a table in the recipe's config%s", o.key, o.raw, strings.Join(path[:i+1], "."), suggest(p, m))
		}
		m = sub
	}
	last := path[len(path)-1]
	old, ok := m[last]
	if !ok && len(path) > 1 && open[strings.Join(path[:len(path)-1], ".")] {
		var doc map[string]any
		if _, err := toml.Decode("v = "+o.raw, &doc); err == nil {
			m[last] = normalizeTOML(doc["v"])
		} else {
			m[last] = o.raw
		}
		return nil
	}
	if !ok {
		return fmt.Errorf("override %s=%s: unknown key %q%s", o.key, o.raw, o.key, suggest(last, m))
	}
	v, err := parseAs(old, o.raw)
	if err != nil {
		return fmt.Errorf("override %s=%s: %w", o.key, o.raw, err)
	}
	m[last] = v
	return nil
}

// parseAs parses text as a value of the same type as like.
func parseAs(like any, text string) (any, error) {
	switch like.(type) {
	case float64:
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("want a number, got %q", text)
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

// suggest proposes the closest known key to a misspelt one.
func suggest(key string, m map[string]any) string {
	best, bestD := "", 3
	for k := range m {
		if d := editDistance(key, k); d < bestD || (d == bestD && k < best) {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
