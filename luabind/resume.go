package luabind

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/rookscript/rookscript/engine/checkpoint"
)

// resumeFixed are the config keys no resume may change, whatever the recipe: the model a run
// starts from (its reference is reloaded from there) and the seed its data, evaluation set and
// rollouts derive from. A recipe names its own with the rule "fixed" (rook.config).
var resumeFixed = []string{"model", "seed"}

// resumeInfo is what resolving a resumed run's config found.
type resumeInfo struct {
	dir        string
	checkpoint string            // the checkpoint whose config was the base
	changes    map[string]change // key → recorded and new value, for the keys the command line changed
	notes      []string
	reported   bool
	applied    bool // rook.run has resumed the run
}

type change struct{ from, to any }

// resumeConfig resolves the config of a resumed run (resume=DIR on the command line). The
// base is the config the run's newest checkpoint recorded, not the recipe's defaults, and the
// TOML file beside the recipe is not read again (its values at the start are in the record);
// the engine defaults the run's calls decoded over are restored too (engineSettings):
// `resume=runs/x` alone continues exactly the run that was started. config=PATH and
// key=value arguments then override it; each change is printed and recorded by the next
// checkpoint, and a key that cannot change mid-run (resumeFixed) is refused by name. Returns
// false when the command line resumes nothing.
func (e *Env) resumeConfig(cfg map[string]any) (bool, error) {
	dir := ""
	for _, o := range e.args {
		if o.key == "resume" {
			dir = o.raw
		}
	}
	if dir == "" {
		return false, nil
	}
	fail := func(err error) (bool, error) { return true, fmt.Errorf("resume=%s: %w", dir, err) }
	ro, err := checkpoint.OpenReadOnly(dir)
	if err != nil {
		return fail(err)
	}
	raw, name, err := ro.RecordedConfig()
	if err != nil {
		return fail(err)
	}
	if raw == nil {
		return fail(fmt.Errorf("checkpoint %s records no config and the run has no config.json: the settings it ran with are unknown", name))
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		return fail(fmt.Errorf("checkpoint %s: recorded config: %w", name, err))
	}
	defaults := deepCopy(cfg).(map[string]any)
	// Several recorded keys this recipe lacks: the run is another recipe's, and no single
	// key's did-you-mean would help.
	var foreign []string
	for _, k := range sortedKeys(rec) {
		if _, declared := cfg[k]; !declared && k != "resume" && !reservedKeys[k] && !settingName(k) {
			foreign = append(foreign, k)
		}
	}
	if len(foreign) > 1 {
		if len(foreign) > 6 {
			foreign = append(foreign[:6], "…")
		}
		return fail(fmt.Errorf("checkpoint %s recorded keys this recipe does not declare (%s): the run was started by another recipe (its copy is %s); resume it with that recipe",
			name, strings.Join(foreign, ", "), filepath.Join(dir, "recipe.lua")))
	}
	for _, k := range sortedKeys(rec) {
		_, declared := cfg[k]
		_, isMap := rec[k].(map[string]any)
		switch {
		case k == "resume":
			delete(rec, k)
		case reservedKeys[k]:
		case declared && sectionNamed(k) != nil && !isMap, !declared && settingName(k):
			return fail(fmt.Errorf("checkpoint %s recorded %s at the top of a flat config, as rookscript did before settings had sections: resume it with the rookscript that started it, or start a new run", name, k))
		case !declared:
			return fail(fmt.Errorf("checkpoint %s recorded key %q, which this recipe does not declare%s (renamed? resume with the recipe the run started with)",
				name, k, didYouMean(k, sortedKeys(cfg))))
		}
	}
	if err := merge(cfg, rec, "", "checkpoint "+name); err != nil {
		return fail(err)
	}
	// The engine defaults the run's calls decoded over, restored before any call decodes.
	settings, _, err := ro.RecordedSettings()
	if err != nil {
		return fail(err)
	}
	notes, err := settingsOf(e.L).restore(settings, fmt.Sprintf("checkpoint %s of %s", name, dir))
	if err != nil {
		return fail(err)
	}
	for _, k := range missingKeys(defaults, rec, "") {
		notes = append(notes, fmt.Sprintf("%s is not in the run's record (a key the recipe gained since): the recipe's default %s", k, show(lookupKey(defaults, k))))
	}

	base := deepCopy(cfg).(map[string]any)
	for _, o := range e.args {
		if o.key == "config" {
			if err := mergeFile(cfg, o.raw); err != nil {
				return fail(err)
			}
		}
	}
	runDirGiven := false
	err = e.applyOverrides(cfg, func(o override) error {
		if o.key == "run_dir" {
			runDirGiven = true
			if !sameDir(o.raw, dir) {
				return fmt.Errorf("run_dir=%s names another directory: a resumed run writes where it ran (leave run_dir out, or give the same directory)", o.raw)
			}
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	cfg["resume"] = dir
	if old, ok := base["run_dir"].(string); ok {
		// The run is where it is resumed, whatever the record calls it (a directory moved, or
		// named from another working directory).
		if !sameDir(old, dir) {
			notes = append(notes, fmt.Sprintf("run_dir %s → %s (the directory resumed)", old, dir))
		}
		if !runDirGiven {
			cfg["run_dir"] = dir
		}
		base["run_dir"] = cfg["run_dir"]
	}

	changes := map[string]change{}
	diffConfig(base, cfg, "", changes)
	for _, k := range resumeFixed {
		if c, ok := changes[k]; ok {
			return fail(fmt.Errorf("%s cannot change in the middle of a run (it ran with %s, the command line gives %s): start a new run for that", k, show(c.from), show(c.to)))
		}
	}
	e.resume = &resumeInfo{dir: dir, checkpoint: name, changes: changes, notes: notes}
	return true, nil
}

// report prints what the resume takes from the record and what the command line changes,
// once: when rook.config has accepted the config (a change it refuses is never listed).
func (ri *resumeInfo) report(e *Env) {
	if ri.reported || e.opts.Quiet {
		return
	}
	ri.reported = true
	fmt.Fprintf(e.out, "resume %s: the config recorded by %s", ri.dir, ri.checkpoint)
	if len(ri.changes) == 0 {
		fmt.Fprintf(e.out, ", unchanged\n")
	} else {
		fmt.Fprintf(e.out, ", changed by the command line:\n")
		for _, k := range sortedKeys(ri.changes) {
			fmt.Fprintf(e.out, "  %s: %s → %s\n", k, show(ri.changes[k].from), show(ri.changes[k].to))
		}
	}
	for _, n := range ri.notes {
		fmt.Fprintf(e.out, "  note: %s\n", n)
	}
}

// settingName reports whether key names a section's setting, now or before.
func settingName(key string) bool {
	for _, s := range sectionSpecs {
		sc := schemaOf(s.typ)
		if _, err := sc.canonical(key, ""); err == nil || sc.renamed[key] != "" {
			return true
		}
	}
	return false
}

// checkFixed refuses a change of one of a recipe's own fixed keys (the rule "fixed").
func (ri *resumeInfo) checkFixed(keys []string) error {
	for _, k := range keys {
		if c, ok := ri.changes[k]; ok {
			return fmt.Errorf("resume=%s: %s cannot change in the middle of this recipe's run (it ran with %s, the command line gives %s): start a new run for that",
				ri.dir, k, show(c.from), show(c.to))
		}
	}
	return nil
}

// missingKeys lists the dotted keys of the defaults that the record lacks (a section's
// record holds all its settings).
func missingKeys(defaults, rec map[string]any, prefix string) []string {
	var out []string
	for _, k := range sortedKeys(defaults) {
		if reservedKeys[k] && prefix == "" {
			continue
		}
		rv, ok := rec[k]
		if !ok {
			out = append(out, prefix+k)
			continue
		}
		dm, isMap := defaults[k].(map[string]any)
		if rm, ok := rv.(map[string]any); isMap && ok && len(dm) > 0 && (prefix != "" || sectionNamed(k) == nil) {
			out = append(out, missingKeys(dm, rm, prefix+k+".")...)
		}
	}
	return out
}

// diffConfig records the leaves that differ between a and b under their dotted names (an open
// table counts as one value).
func diffConfig(a, b map[string]any, prefix string, out map[string]change) {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	for k := range keys {
		if reservedKeys[k] && prefix == "" {
			continue
		}
		av, bv := a[k], b[k]
		am, aok := av.(map[string]any)
		bm, bok := bv.(map[string]any)
		if aok && bok && len(am) > 0 && len(bm) > 0 {
			diffConfig(am, bm, prefix+k+".", out)
			continue
		}
		if show(av) != show(bv) {
			out[prefix+k] = change{av, bv}
		}
	}
}

func lookupKey(m map[string]any, dotted string) any {
	var v any = m
	for _, p := range strings.Split(dotted, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// show writes a config value as JSON (maps with sorted keys), the form the record uses.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// sameDir reports whether two paths name the same directory (the same file when both exist).
func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA == nil && errB == nil {
		return os.SameFile(fa, fb)
	}
	absA, errA := filepath.Abs(a)
	absB, errB := filepath.Abs(b)
	return errA == nil && errB == nil && absA == absB
}
