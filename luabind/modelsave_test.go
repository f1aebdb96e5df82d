package luabind

import (
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
)

// model:save refuses non-finite weights, as run:save does, with its documented nil, err (the
// check is gpt2.SaveHF's, so every writer of a model folder has it), and writes nothing.
func TestModelSaveRefusesNonFiniteWeights(t *testing.T) {
	e, err := New(Options{Stdout: io.Discard, Quiet: true, Trust: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	if err := e.DoString(ctx, `policy = require("rook").load("random:tiny")`, "load.lua"); err != nil {
		t.Fatal(err)
	}
	m := e.L.GetGlobal("policy").(*lua.LUserData).Value.(*model)
	good := m.m.ParamsHost()
	dir := filepath.Join(t.TempDir(), "models", "policy")
	save := func() (ok, msg lua.LValue) {
		t.Helper()
		e.L.SetGlobal("dir", lua.LString(dir))
		if err := e.DoString(ctx, `ok, err = policy:save(dir)`, "save.lua"); err != nil {
			t.Fatalf("model:save raised %v; its contract is nil, err", err)
		}
		return e.L.GetGlobal("ok"), e.L.GetGlobal("err")
	}

	bad := append([]float32(nil), good...)
	bad[3] = float32(math.NaN())
	if err := m.m.SetParams(bad); err != nil {
		t.Fatal(err)
	}
	ok, msg := save()
	if ok != lua.LNil {
		t.Fatalf("model:save of NaN weights returned %v, want nil", ok)
	}
	for _, w := range []string{dir, `tensor "wte.weight" holds NaN at element 3`, "non-finite weights are refused"} {
		if !strings.Contains(msg.String(), w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused save left %s: %v", dir, err)
	}

	if err := m.m.SetParams(good); err != nil {
		t.Fatal(err)
	}
	if ok, msg := save(); ok != lua.LTrue {
		t.Fatalf("model:save of finite weights: %v, %v", ok, msg)
	}
}
