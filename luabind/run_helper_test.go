package luabind

import (
	"context"
	"strings"
	"testing"
)

// runLua runs a chunk in a fresh environment made with opts, its output captured: src under
// the chunk name name, or the recipe file opts.Recipe when src is empty. It returns what the
// chunk printed and the run's error; failing to make the environment fails the test.
func runLua(t testing.TB, opts Options, name, src string) (string, error) {
	t.Helper()
	var out strings.Builder
	opts.Stdout = &out
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if src == "" {
		err = e.RunFile(context.Background(), opts.Recipe)
	} else {
		err = e.DoString(context.Background(), src, name)
	}
	return out.String(), err
}
