package luabind

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelp: the REPL's help() finds docs/lua-api.md's entry of every function, method and
// value a script can reach — by the value itself where it is a function, by name otherwise —
// and lists the modules and types.
func TestHelp(t *testing.T) {
	var out bytes.Buffer
	env, err := New(Options{Quiet: true, Trust: true, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	env.InstallHelp()
	eval := func(chunk string) string {
		t.Helper()
		out.Reset()
		if _, _, err := env.Eval(context.Background(), chunk); err != nil {
			t.Fatalf("%s: %v", chunk, err)
		}
		return out.String()
	}
	for _, a := range registeredAPI(t, env.L).names {
		var chunk string
		switch {
		case a.call && strings.HasPrefix(a.name, "rook."):
			chunk = "help(" + a.name + ")" // the function itself
		case a.call && !strings.Contains(a.name, ":"):
			chunk = "help(require(" + quote(a.name[:strings.Index(a.name, ".")]) + ")" + a.name[strings.Index(a.name, "."):] + ")"
		default:
			chunk = "help " + quote(a.name)
		}
		got := eval("rook = require('rook'); " + chunk)
		if !strings.Contains(got, a.name) || strings.HasPrefix(got, "no ") {
			t.Errorf("%s printed %q, want %s's entry", chunk, got, a.name)
		}
	}
	if got := eval("help(rook.grpo.step)"); !strings.Contains(got, "One GRPO step on a scored batch") {
		t.Errorf("help(rook.grpo.step) printed %q", got)
	}
	if got := eval(`p = rook.load("random:tiny"); help(p.forward_backward)`); !strings.HasPrefix(got, "model:forward_backward(") {
		t.Errorf("help of a method printed %q", got)
	}
	if got := eval("help(p)"); !strings.Contains(got, "Type rook.model:") || !strings.Contains(got, "model:score(") {
		t.Errorf("help of a model printed %q", got)
	}
	if got := eval(`help "zero_grad"`); !strings.HasPrefix(got, "model:zero_grad(") {
		t.Errorf(`help "zero_grad" printed %q`, got)
	}
	if got := eval("help()"); !strings.Contains(got, "Module rook.grpo") || !strings.Contains(got, "Type rook.batch") || !strings.Contains(got, "Module losses") {
		t.Errorf("help() printed %q", got)
	}
}

func quote(s string) string { return `"` + s + `"` }
