package luabind

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/gpt2"
)

// TestLoadDefaultModel: rook.load("default") resolves the embedded default model itself (from
// the cache here), taking the engine to build it with as an option, so recipes need no
// "if model == 'default'" of their own. What it loads is verified: weights that are neither
// the version's known build nor the build this machine recorded are refused, never loaded
// (a model planted in the cache, as a confined recipe could once do).
func TestLoadDefaultModel(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("ROOKSCRIPT_CACHE", cache)
	// The cache entry is scripts/defaultmodel.lua's to name (its version beside its recipe).
	out, err := runLua(t, Options{}, "dir.lua", `local m = require("defaultmodel"); print(m.VERSION); print(m.dir())`)
	if err != nil {
		t.Fatal(err)
	}
	version, dir, _ := strings.Cut(strings.TrimSpace(out), "\n")
	if _, ok := defaultModelHashes[version]; !ok {
		t.Errorf("the binary knows no hash of the default model %s: build it (make run) and add its build.json's hash to defaultModelHashes", version)
	}
	if filepath.Dir(dir) != cache {
		t.Fatalf("the default model's cache entry %q is not in $ROOKSCRIPT_CACHE %s", dir, cache)
	}
	mc := gpt2.Config{VocabSize: 29, MaxSeqLen: 16, NumLayers: 1, NumHeads: 2, Channels: 8, LayerNormE: 1e-5}
	model := filepath.Join(dir, "model")
	os.MkdirAll(dir, 0o755)
	params := gpt2.RandomParams(mc, 3)
	if err := gpt2.SaveHF(model, mc, params); err != nil {
		t.Fatal(err)
	}
	load := `
		local rook = require("rook")
		local m = assert(rook.load("default", { engine = nil }))
		print(m.source)`
	if _, err := runLua(t, Options{}, "default.lua", load); err == nil || !strings.Contains(err.Error(), "it was changed after it was built") {
		t.Fatalf("a planted default model was not refused: %v", err)
	}
	hash := gpt2.ParamsHash(mc, params)
	var dme *DefaultModelError
	if err := checkDefault(model, version, hash, false); !errors.As(err, &dme) || dme.Got != hash || dme.Want != defaultModelHashes[version] {
		t.Fatalf("checkDefault: %v", err)
	}
	// This machine's own build, recorded when it was built, is its version's model here.
	if err := checkDefault(model, version, hash, true); err != nil {
		t.Fatalf("a fresh build is refused: %v", err)
	}
	out, err = runLua(t, Options{}, "default.lua", load)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "(cached in "+model+")") || !strings.Contains(out, "\n"+model+"\n") {
		t.Fatalf("rook.load(\"default\") did not load the cached default model:\n%s", out)
	}
	if err := checkDefault(model, version, "0"+hash[1:], false); !errors.As(err, &dme) {
		t.Fatalf("weights other than the recorded build's: %v", err)
	}
}
