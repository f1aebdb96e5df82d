package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocCommands runs every rookscript command the documentation shows — the README's and
// docs/'s shell blocks, and the usage lines at the top of each shipped recipe — so that no
// example can go stale. Each runs in a fresh directory on the tiny model: the settings that
// make a run long (the model, steps, group, eval size, rows, depth) are replaced, everything
// else is run as written. A run the command reads (resume=runs/x, model=runs/x,
// plot runs/ablate/*) is made first, as the command's reader would have.
func TestDocCommands(t *testing.T) {
	cmds := docCommands(t)
	if len(cmds) < 20 {
		t.Fatalf("found %d documented commands; the extraction is broken", len(cmds))
	}
	for _, c := range cmds {
		t.Run(c.where, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for _, run := range c.runs {
				args := tinyArgs(run)
				makeFixtures(t, dir, args)
				args = expandGlobs(dir, args)
				code, out, errOut := rookscript(t, dir, nil, args...)
				if code == 0 || code == 1 && c.expectFail(errOut) {
					continue
				}
				t.Fatalf("%s\nran as: rookscript %s\nexit %d\n%s\n%s", c.text, strings.Join(args, " "), code, tail(out, 20), tail(errOut, 20))
			}
		})
	}
}

// docCommand is one documented command line: where it is, its text, and the rookscript
// argument lists it runs (several for a seq | xargs loop).
type docCommand struct {
	where, text string
	runs        [][]string
}

// expectFail says whether a command documented to report a failure did so: diagnose.lua on a
// random model fails its "model is trained" check, as it must.
func (c docCommand) expectFail(stderr string) bool {
	return strings.Contains(c.text, "diagnose.lua") && strings.Contains(stderr, "check(s) failed: model is trained, not random")
}

var xargsLoop = regexp.MustCompile(`^seq (\d+) \| xargs .*-I\{\} rookscript (.*)$`)

// docCommands collects the commands: lines starting with "rookscript " (or "$ rookscript ")
// in README.md's and docs/*.md's shell blocks (```sh), and "--   rookscript " lines of recipe
// headers; "seq N | xargs … -I{} rookscript …" runs its N commands in turn.
func docCommands(t *testing.T) []docCommand {
	var out []docCommand
	add := func(where, line string) {
		line = stripComment(line)
		if m := xargsLoop.FindStringSubmatch(line); m != nil {
			c := docCommand{where: where, text: line}
			var n int
			fmt.Sscan(m[1], &n)
			for k := 1; k <= n; k++ {
				c.runs = append(c.runs, shellWords(t, strings.ReplaceAll(m[2], "{}", fmt.Sprint(k))))
			}
			out = append(out, c)
			return
		}
		rest, ok := strings.CutPrefix(strings.TrimPrefix(line, "$ "), "rookscript ")
		if !ok {
			return
		}
		out = append(out, docCommand{where: where, text: line, runs: [][]string{shellWords(t, rest)}})
	}
	docs, _ := filepath.Glob("../../docs/*.md")
	for _, f := range append([]string{"../../README.md"}, docs...) {
		lines := readLines(t, f)
		fence := ""
		for i := 0; i < len(lines); i++ {
			l := lines[i]
			if info, ok := strings.CutPrefix(l, "```"); ok {
				if fence == "" {
					fence = "other" // an untagged block shows output
					if info == "sh" || info == "shell" || info == "console" {
						fence = "shell"
					}
				} else {
					fence = ""
				}
				continue
			}
			if fence != "shell" {
				continue
			}
			start := i
			for strings.HasSuffix(l, `\`) && i+1 < len(lines) { // a continued line
				i++
				l = strings.TrimSuffix(l, `\`) + " " + strings.TrimSpace(lines[i])
			}
			add(fmt.Sprintf("%s:%d", filepath.Base(f), start+1), l)
		}
	}
	recipes, _ := filepath.Glob("../../recipes/*.lua")
	for _, f := range recipes {
		for i, l := range readLines(t, f) {
			if cmd, ok := strings.CutPrefix(l, "--   "); ok {
				add(fmt.Sprintf("%s:%d", filepath.Base(f), i+1), cmd)
			}
		}
	}
	return out
}

// The settings a documented command gets on the tiny model, by recipe; the command's own value
// of such a key is replaced. A resume takes its run's recorded config and gets none.
var tinySettings = map[string][]string{
	"grpo_stable.lua": {"model=random:tiny", "steps=1", "prompts=2", "group=4", "max_new_tokens=12", "eval_size=4",
		"micro_batch=8", "stockfish.depth=2"},
	"sft.lua":      {"model=random:tiny", "rows=16", "steps=2", "batch=4", "stockfish.depth=2"},
	"eval.lua":     {"size=4", "eval.max_new_tokens=8", "stockfish.depth=2"},
	"diagnose.lua": {"prompts=2", "group=4", "max_new_tokens=12", "overfit_steps=2", "stockfish.depth=2"},
	"ablate.lua": {"steps=1", "pass.model=random:tiny", "pass.prompts=2", "pass.group=4", "pass.max_new_tokens=12",
		"pass.eval_size=4", "pass.micro_batch=8", "pass.stockfish.depth=2"},
}

// tinyArgs is a documented argument list made to run here: the recipe by its path in this
// repository, the tiny settings, and a placeholder model (path/to/…, ~/models/…) made tiny.
func tinyArgs(args []string) []string {
	if len(args) == 0 || !strings.HasPrefix(args[0], "recipes/") {
		return args
	}
	out := []string{mustAbs(filepath.Join("../..", args[0]))}
	recipe := filepath.Base(args[0])
	resume := slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "resume=") })
	set := map[string]string{}
	if !resume {
		for _, kv := range tinySettings[recipe] {
			k, v, _ := strings.Cut(kv, "=")
			set[k] = v
		}
	}
	for _, a := range args[1:] {
		k, v, ok := strings.Cut(a, "=")
		if ok && (strings.Contains(v, "path/to/") || strings.HasPrefix(v, "~/")) && strings.HasSuffix(k, "model") {
			v = "random:tiny"
		}
		if tv, tiny := set[settingKey(k, set)]; ok && tiny {
			v = tv
			delete(set, settingKey(k, set))
		}
		if ok {
			out = append(out, k+"="+v)
		} else {
			out = append(out, a)
		}
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range set {
			if !yield(k) {
				return
			}
		}
	}) {
		out = append(out, k+"="+set[k])
	}
	return out
}

// settingKey is the tiny setting a command's key names: the same key, or the same setting
// with or without its section (rollout.max_new_tokens and max_new_tokens).
func settingKey(k string, set map[string]string) string {
	if _, ok := set[k]; ok {
		return k
	}
	last := k[strings.LastIndex(k, ".")+1:]
	for s := range set {
		if s[strings.LastIndex(s, ".")+1:] == last && strings.HasPrefix(s, "pass.") == strings.HasPrefix(k, "pass.") {
			return s
		}
	}
	return k
}

var runRef = regexp.MustCompile(`^(?:(?:resume|model)=)?(runs/[\w.-]+)(/\*)?$`)

// makeFixtures makes the runs a command reads and that do not exist yet: runs/NAME, by a tiny
// run of the recipe that makes it (sft.lua for runs/sft, grpo_stable.lua for the others), and
// runs/NAME/*, by a tiny ablation there. A collect=true reads the arms of its own ablation,
// which runs first.
func makeFixtures(t *testing.T, dir string, args []string) {
	t.Helper()
	if slices.Contains(args, "collect=true") {
		arms := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "collect=true" })
		mustRun(t, dir, arms)
	}
	for _, a := range args {
		m := runRef.FindStringSubmatch(a)
		if m == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, m[1])); err == nil {
			continue
		}
		switch {
		case m[2] != "":
			mustRun(t, dir, tinyArgs([]string{"recipes/ablate.lua", "base_dir=" + m[1], "grid.beta=[0, 0.05]"}))
		case m[1] == "runs/sft":
			mustRun(t, dir, tinyArgs([]string{"recipes/sft.lua", "run_dir=" + m[1]}))
		default:
			mustRun(t, dir, tinyArgs([]string{"recipes/grpo_stable.lua", "run_dir=" + m[1]}))
		}
	}
}

func mustRun(t *testing.T, dir string, args []string) {
	t.Helper()
	if code, out, errOut := rookscript(t, dir, nil, args...); code != 0 {
		t.Fatalf("making a run the command reads: rookscript %s: exit %d\n%s\n%s", strings.Join(args, " "), code, tail(out, 10), tail(errOut, 10))
	}
}

// expandGlobs expands the arguments a shell would (runs/ablate/*), in dir.
func expandGlobs(dir string, args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.Contains(a, "*") || strings.Contains(a, "=") {
			out = append(out, a)
			continue
		}
		matches, _ := filepath.Glob(filepath.Join(dir, a))
		for _, m := range matches {
			rel, _ := filepath.Rel(dir, m)
			out = append(out, rel)
		}
	}
	return out
}

// shellWords splits a command line as sh does for the quoting documentation uses: '…', "…"
// and backslash escapes.
func shellWords(t *testing.T, s string) []string {
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words, in = append(words, w.String()), false
				w.Reset()
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// stripComment drops a trailing "# …" outside quotes.
func stripComment(s string) string {
	quote := rune(0)
	for i, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '\'' || r == '"'):
			quote = r
		case quote == 0 && r == '#' && (i == 0 || s[i-1] == ' '):
			return strings.TrimSpace(s[:i])
		}
	}
	return strings.TrimSpace(s)
}

func readLines(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
