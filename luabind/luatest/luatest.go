// Package luatest runs Lua test files as Go subtests.
//
// A test file returns a table of functions; every function whose name starts with "test_"
// runs as a subtest (sorted by name) in a fresh environment, with module "check" (assertion
// helpers, and check.tmpdir for paths in the subtest's own temporary directory) on the search
// path. A Lua error fails the subtest with the message and traceback.
//
//	local check = require("check")
//	local T = {}
//	function T.test_linear_warmup() check.near(sched.kl_warmup(5, cfg), 0.05, 1e-12) end
//	return T
package luatest

import (
	"context"
	_ "embed"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/luabind"
)

//go:embed check.lua
var checkModule string

// Run runs the test functions of one file.
func Run(t *testing.T, file string, opts luabind.Options) {
	t.Helper()
	opts.Modules = map[string]string{"check": check(t.TempDir())}
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	names := listTests(t, file, string(src), opts)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			o := opts
			o.Recipe = file
			o.Modules = map[string]string{"check": check(t.TempDir())}
			env, err := luabind.New(o)
			if err != nil {
				t.Fatal(err)
			}
			defer env.Close()
			chunk := "local T = (function() " + string(src) + "\nend)()\nT." + name + "()" // same line numbers as the file
			if err := env.DoString(context.Background(), chunk, filepath.Base(file)); err != nil {
				t.Fatal(strings.ReplaceAll(err.Error(), "\t", "  "))
			}
		})
	}
}

// check is module check's source for a test whose temporary directory is dir, defined on the
// module's first line so that its line numbers stay the file's.
func check(dir string) string {
	return "local TESTDIR = [==[" + dir + "]==]; " + checkModule
}

// Files returns the *_test.lua files of a directory.
func Files(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.lua"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no *_test.lua files in %s (%v)", dir, err)
	}
	return files
}

func listTests(t *testing.T, file, src string, opts luabind.Options) []string {
	opts.Recipe = file
	env, err := luabind.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	vals, _, err := env.Eval(context.Background(), "(function()\n"+src+"\nend)()")
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(vals) != 1 || !strings.HasPrefix(vals[0], "{") {
		t.Fatalf("%s must return a table of test functions", file)
	}
	var names []string
	for _, line := range strings.Split(vals[0], "\n") {
		line = strings.TrimSpace(line)
		if name, _, ok := strings.Cut(line, " = "); ok && strings.HasPrefix(name, "test_") {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		t.Fatalf("%s has no test_ functions", file)
	}
	sort.Strings(names)
	return names
}
