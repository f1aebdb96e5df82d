package luabind

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/checkpoint"
	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/rollout"
)

// A recipe's config resolves once, in rook.config, from layers applied in order: the
// recipe's defaults; a TOML file (config=PATH, or the recipe's name with .toml beside it) or,
// with resume=DIR, the config the run recorded; then the command line's key=value arguments.
// Every layer is a list of assignments to dotted keys, resolved one way: a key names a value
// of the recipe (steps), a setting of a section (grpo.beta), a setting by its own name when
// one section has it (beta), or a key inside a table the recipe declared empty (pass = {}).
// A recipe value keeps its default's type; a section is decoded over its call's defaults and
// validated, once. Where each key's value came from is recorded with the config (provenance;
// a key absent there has the recipe's default). Every error is a *ConfigError naming its key.

// ConfigError is a config key or value a recipe cannot run with. It comes without a Lua
// traceback: the key says where to look.
type ConfigError struct {
	At     string // the recipe's file:line that resolved it
	Source string // where the value came from: "command line", "config file x.toml", …
	Key    string // dotted: "grpo.beta"; "" for an error of the whole config
	Value  any    // the value refused; nil when the key itself is
	Reason string
	Err    error // the error behind Reason, when it names the key itself (an unknown option)
}

func (e *ConfigError) Error() string {
	what := e.Key + ": " + e.Reason
	if strings.HasPrefix(e.Reason, "must ") || strings.HasPrefix(e.Reason, "cannot ") {
		what = e.Key + " " + e.Reason // a predicate reads as a sentence: "lr must be > 0"
	}
	parts := []string{e.At, e.Source, strings.Trim(what, ": ")}
	if e.Err != nil {
		parts = []string{e.At, e.Source, e.Err.Error()}
	}
	return strings.Join(slices.DeleteFunc(parts, func(p string) bool { return p == "" }), ": ")
}

func (e *ConfigError) Unwrap() error  { return e.Err }
func (e *ConfigError) String() string { return e.Error() }

const configErrorType = "rook.config_error"

// raiseConfig raises err as a config error at the calling recipe's line; a value the settings
// decoder refused names its key.
func raiseConfig(L *lua.LState, err error) {
	ce := &ConfigError{Err: err}
	if oe := (*OptionError)(nil); errors.As(err, &oe) {
		ce.Key = oe.Key
	}
	errors.As(err, &ce) // a *ConfigError keeps its fields
	ce.At = strings.TrimSuffix(L.Where(1), ":")
	L.Error(newUserData(L, configErrorType, ce), 1)
}

// raiseConfigf raises a config error of the whole config (a plan over its budget, say).
func raiseConfigf(L *lua.LState, format string, args ...any) {
	raiseConfig(L, &ConfigError{Reason: fmt.Sprintf(format, args...)})
}

type override struct{ key, raw string }

var keyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// reservedKeys are accepted by every rook.config without being declared: config names a
// TOML file of values, resume a run directory to continue.
var reservedKeys = map[string]bool{"config": true, "resume": true}

// resumeFixed are the keys no resume may change, whatever the recipe: the model a run starts
// from (its reference is reloaded from there) and the seed its data derive from.
var resumeFixed = []string{"model", "seed"}

func parseOverrides(args []string) ([]override, error) {
	var out []override
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		switch {
		case !ok || !keyPattern.MatchString(k):
			return nil, fmt.Errorf("argument %q is not key=value", a)
		case slices.ContainsFunc(out, func(o override) bool { return o.key == k }):
			return nil, fmt.Errorf("key %q given twice on the command line", k)
		}
		out = append(out, override{key: k, raw: v})
	}
	return out, nil
}

// A layer is a source of values: assignments of parsed values (TOML, a record) or of text
// (the command line), which the key's type decides how to read.
type layer struct {
	source string
	keys   []string
	values []any
	text   bool
	record bool // a resumed run's record, which brings its own provenance
}

// resumeInfo is what resolving a resumed run's config found.
type resumeInfo struct {
	dir, checkpoint string
	notes           []string
	applied         bool // rook.run has resumed the run
}

// rook.config(defaults [, rules]) → cfg: the recipe's values as a table, and each section (a
// key named after an engine call: grpo, rollout, adamw, reward, stockfish, eval, sft) as its
// resolved settings. A run_dir in the config is checked now, as rook.run would, before the
// recipe loads anything.
func (e *Env) luaConfig(L *lua.LState) int {
	g, err := toGo(L.CheckTable(1))
	values, ok := g.(map[string]any)
	if msg := "config defaults must be a table of named values"; err != nil {
		L.ArgError(1, msg+": "+err.Error())
	} else if !ok {
		L.ArgError(1, msg)
	}
	rec, err := e.resolveConfig(L, values, L.OptTable(2, nil))
	if err != nil {
		raiseConfig(L, err)
	}
	e.mu.Lock()
	e.config = rec
	e.mu.Unlock()
	out := fromGo(L, rec).(*lua.LTable)
	out.RawSetString("provenance", lua.LNil)
	L.Push(out)
	return 1
}

// resolveConfig applies the layers over the recipe's defaults, decodes and checks each
// section and the recipe's rules, and returns the config as a run records it.
func (e *Env) resolveConfig(L *lua.LState, values map[string]any, rules *lua.LTable) (map[string]any, error) {
	defaults := layer{source: "recipe defaults"}
	flatten(values, "", &defaults)
	c := &config{values: values, prov: map[string]any{}}
	if err := c.check(defaults); err != nil {
		return nil, err
	}
	c.shape = plain(values).(map[string]any) // pristine: a table declared empty stays open
	for k := range c.shape {
		if s := sectionNamed(k); s != nil {
			c.shape[k] = s.shape
		}
	}
	layers, err := e.layers(c)
	var base map[string]any // a resumed run's record: what the layers after it change
	for i := 0; err == nil && i < len(layers); i++ {
		if err = c.apply(layers[i]); layers[i].record {
			base = plain(values).(map[string]any)
		}
	}
	rec, read := map[string]any{"provenance": c.prov}, map[string]any{}
	for _, k := range sortedKeys(values) {
		if rec[k] = values[k]; err == nil && sectionNamed(k) != nil {
			read[k], err = sectionNamed(k).read(fromGo(L, values[k]), k+".")
			rec[k] = record(read[k])
		}
	}
	if roll, ok := read["rollout"].(*rollout.Config); ok && err == nil && values["grpo"] != nil { // a GRPO step compares a rollout's groups
		if err = grpo.CheckGroup(roll.Group); err != nil {
			err = &ConfigError{Key: "rollout.group", Reason: err.Error()}
		}
	}
	if err == nil {
		err = overlongFits(read["reward"], read["rollout"]) // its lengths within the rollout's budget
	}
	var fixed []string
	if err == nil {
		fixed, err = checkRules(L, e.guard, values, rules)
	}
	if ri := e.resume; err == nil && ri != nil && !ri.applied {
		err = ri.check(e, base, values, append(fixed, resumeFixed...))
	}
	if err == nil {
		err = e.grantRunDirs(values)
	}
	return rec, err
}

// config is a config being resolved: its values; its shape, the keys it takes and a value of
// each one's type (the recipe's defaults, each section standing for all its call's settings);
// and where each key's value came from.
type config struct {
	values, shape, prov map[string]any
}

// flatten adds m's leaves to ly; a record's null is a setting left at its default.
func flatten(m map[string]any, prefix string, ly *layer) {
	for _, k := range sortedKeys(m) {
		if sub, ok := m[k].(map[string]any); ok && len(sub) > 0 {
			flatten(sub, prefix+k+".", ly)
		} else if m[k] != nil {
			ly.keys, ly.values = append(ly.keys, prefix+k), append(ly.values, m[k])
		}
	}
}

// check refuses what no config may hold: a non-finite number (config.json could not record
// it), a section given as something other than a table.
func (c *config) check(ly layer) error {
	for i, key := range ly.keys {
		if _, err := json.Marshal(ly.values[i]); err != nil {
			return &ConfigError{Key: key, Source: ly.source, Value: ly.values[i], Reason: fmt.Sprintf("want a finite number, got %v", ly.values[i])}
		}
		if s := sectionNamed(key); s != nil && typeName(ly.values[i]) != "table" {
			return &ConfigError{Key: key, Source: ly.source, Reason: fmt.Sprintf("must be a table of %s's settings, got a %s", s.call, typeName(ly.values[i]))}
		}
	}
	return nil
}

// layers are the sources over the recipe's defaults: the resumed run's record or a TOML
// file, then the command line.
func (e *Env) layers(c *config) ([]layer, error) {
	var out []layer
	cli := layer{source: "command line", text: true}
	args := map[string]string{}
	for _, o := range e.args {
		if args[o.key] = o.raw; reservedKeys[o.key] {
			c.values[o.key] = o.raw
		} else {
			cli.keys, cli.values = append(cli.keys, o.key), append(cli.values, o.raw)
		}
	}
	if dir := args["resume"]; dir != "" {
		ly, err := e.resumeLayer(c, dir, args)
		if err != nil {
			return nil, err
		}
		out = append(out, ly)
	}
	path := args["config"]
	if beside := strings.TrimSuffix(e.opts.Recipe, ".lua") + ".toml"; path == "" && args["resume"] == "" && e.opts.Recipe != "" && fileExists(beside) {
		path = beside
	}
	if path != "" {
		ly := layer{source: "config file " + path}
		var file map[string]any
		if _, err := toml.DecodeFile(path, &file); err != nil {
			return nil, &ConfigError{Source: ly.source, Reason: err.Error()}
		}
		flatten(plain(file).(map[string]any), "", &ly)
		out = append(out, ly)
		c.values["config"] = path
	}
	return append(out, cli), nil
}

// apply sets a layer's values, each setting once.
func (c *config) apply(ly layer) error {
	if err := c.check(ly); err != nil && !ly.text {
		return err
	}
	set := map[string]string{} // canonical key → the key that set it
	for i, key := range ly.keys {
		path, like, err := c.resolve(key)
		if unknown := (*UnknownOptionError)(nil); errors.As(err, &unknown) {
			return &ConfigError{Key: key, Source: ly.source, Err: err} // it names its key
		}
		canon, v := strings.Join(path, "."), ly.values[i]
		if prev, twice := set[canon]; twice && err == nil {
			return &ConfigError{Key: canon, Source: ly.source, Reason: fmt.Sprintf("%s and %s both set it (one setting by two names): give it once", prev, key)}
		}
		if set[canon] = key; err == nil && ly.text {
			v, err = parseAs(like, v.(string))
		} else if err == nil && like != nil {
			err = sameType(like, v)
		}
		if err != nil {
			return &ConfigError{Key: key, Source: ly.source, Value: ly.values[i], Reason: err.Error()}
		}
		setAt(c.values, path, v)
		if !ly.record {
			c.prov[canon] = ly.source
		}
	}
	return nil
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

// resolve finds the dotted path key names and a value of the type it takes (nil: any, inside
// an open table), walking the config's shape.
func (c *config) resolve(key string) ([]string, any, error) {
	path := strings.Split(key, ".")
	if _, declared := c.shape[path[0]]; !declared && len(path) == 1 {
		var err error
		if path, err = c.findSetting(key); err != nil {
			return nil, nil, err
		}
	}
	section, m := sectionNamed(path[0]) != nil, c.shape
	for i, p := range path {
		at := strings.Join(path[:i+1], ".")
		if i > 0 && len(m) == 0 { // a table the recipe declared empty takes any key (ablate.lua's pass = {})
			return path, nil, nil
		}
		v, ok := m[p]
		sub, isMap := v.(map[string]any)
		switch {
		case !ok && i == 0 && section:
			return nil, nil, fmt.Errorf("this recipe has no %s section", p)
		case !ok && section: // a setting, named as the call's option tables name it
			return nil, nil, &UnknownOptionError{Key: at, Suggestion: didYouMean(p, sortedKeys(m))}
		case !ok:
			return nil, nil, &UnknownOptionError{What: "key", Key: at, Suggestion: didYouMean(p, sortedKeys(m))}
		case i == len(path)-1 && section && isMap:
			return nil, nil, fmt.Errorf("a table of settings: set one of them (%s.KEY=VALUE)", at)
		case i == len(path)-1:
			return path, v, nil
		case !isMap:
			return nil, nil, fmt.Errorf("%s is not a table of settings", at)
		}
		m = sub
	}
	return path, nil, nil
}

// findSetting is the path of the one section setting called key among the config's sections:
// {"grpo", "beta"} for beta; a name several sections share must be written with its section.
func (c *config) findSetting(key string) ([]string, error) {
	var found []string
	known := sortedKeys(c.shape)
	var walk func(m map[string]any, at string)
	walk = func(m map[string]any, at string) {
		for _, k := range sortedKeys(m) {
			if known = append(known, k); k == key {
				found = append(found, at+k)
			}
			if sub, ok := m[k].(map[string]any); ok {
				walk(sub, at+k+".")
			}
		}
	}
	for _, s := range sectionSpecs {
		if _, declared := c.shape[s.name]; declared {
			walk(s.shape, s.name+".")
		}
	}
	switch len(found) {
	case 0:
		return nil, &UnknownOptionError{What: "key", Key: key, Suggestion: didYouMean(key, known)}
	case 1:
		return strings.Split(found[0], "."), nil
	}
	return nil, fmt.Errorf("a setting of several sections: write %s", strings.Join(found, " or "))
}

// resumeLayer is the config a resumed run recorded (its newest checkpoint's): `resume=runs/x`
// alone continues exactly the run that was started, and the TOML beside the recipe is not read
// again (its values at the start are in the record).
func (e *Env) resumeLayer(c *config, dir string, args map[string]string) (layer, error) {
	fail := func(format string, a ...any) (layer, error) {
		return layer{}, &ConfigError{Source: "resume=" + dir, Reason: fmt.Sprintf(format, a...)}
	}
	ro, err := checkpoint.OpenReadOnly(dir)
	if err != nil {
		return fail("%v", err)
	}
	defer ro.Close()
	raw, name, err := ro.RecordedConfig()
	var rec map[string]any
	switch {
	case err != nil:
		return fail("%v", err)
	case raw == nil:
		return fail("checkpoint %s records no config and the run has no config.json: the settings it ran with are unknown", name)
	case json.Unmarshal(raw, &rec) != nil:
		return fail("checkpoint %s: its recorded config is not JSON", name)
	}
	ri := &resumeInfo{dir: dir, checkpoint: name}
	if prov, ok := rec["provenance"].(map[string]any); ok {
		c.prov = prov
	}
	var foreign []string
	for _, k := range sortedKeys(rec) {
		if _, declared := c.values[k]; !declared && k != "provenance" && !reservedKeys[k] {
			foreign = append(foreign, k)
		}
	}
	for _, k := range []string{"provenance", "resume", "config"} {
		delete(rec, k)
	}
	switch at := filepath.Join(dir, "recipe.lua"); {
	case len(foreign) == 1:
		return fail("checkpoint %s recorded key %q, which this recipe does not declare%s: resume with the recipe the run started with (its copy is %s)",
			name, foreign[0], didYouMean(foreign[0], sortedKeys(c.values)), at)
	case len(foreign) > 1: // another recipe's run: no one key's did-you-mean would help
		return fail("checkpoint %s recorded keys this recipe does not declare (%s): the run was started by another recipe (its copy is %s)",
			name, strings.Join(foreign, ", "), at)
	}
	for _, k := range sortedKeys(c.values) {
		if _, ok := rec[k]; !ok && !reservedKeys[k] {
			ri.notes = append(ri.notes, fmt.Sprintf("%s is not in the run's record (a key the recipe gained since): the recipe's default %s", k, show(c.values[k])))
		}
	}
	if old, ok := rec["run_dir"].(string); ok { // the run is where it is resumed, whatever the record calls it
		if !sameDir(old, dir) {
			ri.notes = append(ri.notes, fmt.Sprintf("run_dir %s → %s (the directory resumed)", old, dir))
		}
		rec["run_dir"] = dir
		if given, ok := args["run_dir"]; ok && !sameDir(given, dir) {
			return fail("run_dir=%s names another directory: a resumed run writes where it ran (leave run_dir out, or give the same directory)", given)
		} else if ok {
			rec["run_dir"] = given // as the command line spells it: no change to report
		}
	}
	e.resume = ri
	ly := layer{source: "checkpoint " + name, record: true}
	flatten(rec, "", &ly)
	return ly, nil
}

// check refuses a change of a key no resume may change, then prints what the resume takes
// from the record and what the command line changes.
func (ri *resumeInfo) check(e *Env, base, now map[string]any, fixed []string) error {
	changes := diffConfig(base, now, "")
	for _, k := range fixed {
		if ch, ok := changes[k]; ok {
			return &ConfigError{Key: k, Source: "resume=" + ri.dir, Value: ch[1], Reason: fmt.Sprintf(
				"cannot change in the middle of a run (it ran with %s, the command line gives %s): start a new run for that", show(ch[0]), show(ch[1]))}
		}
	}
	if e.opts.Quiet {
		return nil
	}
	fmt.Fprintf(e.out, "resume %s: the config recorded by %s", ri.dir, ri.checkpoint)
	if len(changes) == 0 {
		fmt.Fprintf(e.out, ", unchanged\n")
	} else {
		fmt.Fprintf(e.out, ", changed by the command line:\n")
	}
	for _, k := range sortedKeys(changes) {
		fmt.Fprintf(e.out, "  %s: %s → %s\n", k, show(changes[k][0]), show(changes[k][1]))
	}
	for _, n := range ri.notes {
		fmt.Fprintf(e.out, "  note: %s\n", n)
	}
	return nil
}

// diffConfig lists the leaves that differ between a and b under their dotted names (an open
// table counts as one value).
func diffConfig(a, b map[string]any, prefix string) map[string][2]any {
	out := map[string][2]any{}
	keys := append(sortedKeys(a), sortedKeys(b)...)
	for _, k := range keys {
		am, aok := a[k].(map[string]any)
		bm, bok := b[k].(map[string]any)
		switch {
		case reservedKeys[k] && prefix == "":
		case aok && bok && len(am) > 0 && len(bm) > 0:
			for dk, v := range diffConfig(am, bm, prefix+k+".") {
				out[dk] = v
			}
		case show(a[k]) != show(b[k]):
			out[prefix+k] = [2]any{a[k], b[k]}
		}
	}
	return out
}

// parseAs reads a key=value argument's text as a value of like's type (any, for nil): a
// string as it is, anything else in TOML syntax (betas=[0.9,0.95]).
func parseAs(like any, text string) (any, error) {
	if _, isString := like.(string); isString {
		return text, nil
	}
	var doc map[string]any
	if _, err := toml.Decode("v = "+text, &doc); err != nil {
		if like == nil {
			return text, nil // inside an open table, text that is no TOML value is a string
		}
		return nil, fmt.Errorf("want a %s, got %q", typeName(like), text)
	}
	if _, err := json.Marshal(doc["v"]); err != nil {
		return nil, fmt.Errorf("want a finite number, got %q", text)
	}
	v := plain(doc["v"])
	if like == nil {
		return v, nil
	}
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

// typeName names a config value's type in messages.
func typeName(v any) string {
	t := fmt.Sprintf("%T", v)
	return cmp.Or(map[string]string{"float64": "number", "string": "string", "bool": "boolean", "[]interface {}": "list",
		"map[string]interface {}": "table", "<nil>": "nil"}[t], t)
}

// plain is v in toGo's shapes (float64, string, bool, []any, map[string]any) as a deep copy:
// TOML's integers and arrays of tables become what a Lua table gives. A value JSON cannot hold
// (a NaN) comes back as it is, for check to refuse.
func plain(v any) any {
	var out any
	if b, err := json.Marshal(v); err == nil && json.Unmarshal(b, &out) == nil {
		return out
	}
	return v
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// show writes a config value as JSON (maps with sorted keys), the form the record uses.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
