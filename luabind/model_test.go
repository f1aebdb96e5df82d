package luabind

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/gpt2"
)

// TestLoadDefaultModel: rook.load("default") resolves the embedded default model itself (from
// the cache here), taking the engine to build it with as an option, so recipes need no
// "if model == 'default'" of their own.
func TestLoadDefaultModel(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("ROOKSCRIPT_CACHE", cache)
	// The cache entry is scripts/defaultmodel.lua's to name (its version beside its recipe).
	dir, err := runLua(t, Options{}, "dir.lua", `print(require("defaultmodel").dir())`)
	if err != nil {
		t.Fatal(err)
	}
	if dir = strings.TrimSpace(dir); filepath.Dir(dir) != cache {
		t.Fatalf("the default model's cache entry %q is not in $ROOKSCRIPT_CACHE %s", dir, cache)
	}
	mc := gpt2.Config{VocabSize: 29, MaxSeqLen: 16, NumLayers: 1, NumHeads: 2, Channels: 8, LayerNormE: 1e-5}
	model := filepath.Join(dir, "model")
	os.MkdirAll(dir, 0o755)
	if err := gpt2.SaveHF(model, mc, gpt2.RandomParams(mc, 3)); err != nil {
		t.Fatal(err)
	}
	out, err := runLua(t, Options{}, "default.lua", `
		local rook = require("rook")
		local m = assert(rook.load("default", { engine = nil }))
		print(m.source)`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "(cached in "+model+")") || !strings.Contains(out, "\n"+model+"\n") {
		t.Fatalf("rook.load(\"default\") did not load the cached default model:\n%s", out)
	}
}
