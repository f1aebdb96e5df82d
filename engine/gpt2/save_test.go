package gpt2

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/safetensors"
)

// The savers refuse non-finite weights, as the loaders do, naming the file and the tensor, and
// write nothing: a model folder or .bin that exists is one that loads.
func TestSaveRefusesNonFiniteWeights(t *testing.T) {
	cfg, params := ioTestConfig, ioTestParams(ioTestConfig)
	l := NewLayout(cfg)
	set := func(name string, i int, v float32) []float32 {
		lt, ok := l.Lookup(name)
		if !ok {
			t.Fatalf("no tensor %q", name)
		}
		p := slices.Clone(params)
		p[lt.Off+i] = v
		return p
	}
	for _, c := range []struct {
		name    string
		params  []float32
		tensor  string
		element int
	}{
		{"NaN in a matrix", set("h.1.mlp.c_fc.weight", 5, float32(math.NaN())), "h.1.mlp.c_fc.weight", 5},
		{"+Inf in wte", set("wte.weight", 0, float32(math.Inf(1))), "wte.weight", 0},
		{"-Inf in the last bias", set("ln_f.bias", 3, float32(math.Inf(-1))), "ln_f.bias", 3},
	} {
		for _, s := range []struct {
			format string
			save   func(path string, cfg Config, params []float32) error
		}{{"hf", SaveHF}, {"llm.c", SaveLLMC}} {
			t.Run(s.format+" "+c.name, func(t *testing.T) {
				root := t.TempDir()
				path := filepath.Join(root, "model")
				err := s.save(path, cfg, c.params)
				var se *SaveError
				var nf *NonFiniteError
				if !errors.As(err, &se) || se.File != path || !errors.As(err, &nf) || nf.Tensor != c.tensor || nf.Element != c.element {
					t.Fatalf("error %v, want a *SaveError of %s for %s[%d]", err, path, c.tensor, c.element)
				}
				if entries, _ := os.ReadDir(root); len(entries) != 0 {
					t.Errorf("a refused save wrote %v", entries)
				}
			})
		}
	}
}

// A model folder SaveHF writes records the content hash of its weights and config in
// model.safetensors' metadata, and LoadHF checks it: a flipped bit or an edited config.json is
// refused naming the file. A folder without the hash (transformers', or one whose weights were
// rewritten by another tool) loads as before.
func TestHFContentHash(t *testing.T) {
	cfg, params := ioTestConfig, ioTestParams(ioTestConfig)
	saved := filepath.Join(t.TempDir(), "model")
	if err := SaveHF(saved, cfg, params); err != nil {
		t.Fatal(err)
	}
	st, err := safetensors.Read(filepath.Join(saved, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Metadata[HFHashKey]; got != ParamsHash(cfg, params) {
		t.Fatalf("metadata %q = %q, want ParamsHash %s", HFHashKey, got, ParamsHash(cfg, params))
	}

	// copyOf copies the saved folder and applies edit to the named file's bytes.
	copyOf := func(t *testing.T, file string, edit func([]byte) []byte) string {
		dir := filepath.Join(t.TempDir(), "model")
		os.Mkdir(dir, 0o755)
		for _, f := range []string{"config.json", "model.safetensors"} {
			b, err := os.ReadFile(filepath.Join(saved, f))
			if err != nil {
				t.Fatal(err)
			}
			if f == file {
				b = edit(b)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	unchanged := func(b []byte) []byte { return b }
	// withoutHash rewrites the weights as another writer would: same tensors, no hash.
	withoutHash := func(b []byte) []byte {
		st, err := safetensors.Parse("model.safetensors", b)
		if err != nil {
			t.Fatal(err)
		}
		var ts []safetensors.Tensor
		for _, n := range st.Names() {
			ts = append(ts, st.Tensors[n])
		}
		p := filepath.Join(t.TempDir(), "foreign.safetensors")
		if err := safetensors.Write(p, ts, nil); err != nil {
			t.Fatal(err)
		}
		out, _ := os.ReadFile(p)
		return out
	}
	for _, c := range []struct {
		name    string
		file    string
		edit    func([]byte) []byte
		refused bool
	}{
		{"as saved", "model.safetensors", unchanged, false},
		// The last float's low mantissa bit: a finite weight that differs in one bit.
		{"a flipped bit in the weights", "model.safetensors", func(b []byte) []byte { b[len(b)-4] ^= 1; return b }, true},
		{"the recorded hash damaged", "model.safetensors", func(b []byte) []byte {
			i := strings.Index(string(b), ParamsHash(cfg, params))
			b[i] ^= 1
			return b
		}, true},
		{"an edited config.json", "config.json", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"layer_norm_epsilon": 1e-05`, `"layer_norm_epsilon": 1e-06`, 1))
		}, true},
		{"weights rewritten without the hash", "model.safetensors", withoutHash, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copyOf(t, c.file, c.edit)
			gotCfg, got, _, err := Load(dir)
			if !c.refused {
				if err != nil || gotCfg != cfg || !bitsEqual(got, params) {
					t.Fatalf("did not load the saved model: %v", err)
				}
				return
			}
			wantLoadError(t, err, BadHash, filepath.Join(dir, "model.safetensors"))
		})
	}
}

// A save killed mid-way leaves its temporary folder beside the target; the next save of that
// target removes it (atomicfile.TempDir), and leaves other folders alone.
func TestSaveHFRemovesWhatAKilledSaveLeft(t *testing.T) {
	cfg, params := ioTestConfig, ioTestParams(ioTestConfig)
	root := t.TempDir()
	stale := filepath.Join(root, ".tmp-model-123456")
	other := filepath.Join(root, ".tmp-model2-123456")
	for _, d := range []string{stale, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, ".tmp-model.safetensors-99"), nil, 0o644)
	}
	if err := SaveHF(filepath.Join(root, "model"), cfg, params); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the killed save's folder is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another target's folder was removed: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "model"))
	if len(entries) != 2 {
		t.Errorf("the model folder holds %v", entries)
	}
}

// SaveHF writes into a new folder, an empty one or a model's, and refuses any other folder
// that holds something: a run directory's config.json is not a model's to overwrite.
func TestSaveHFRefusesAFolderThatIsNotAModel(t *testing.T) {
	cfg, params := ioTestConfig, ioTestParams(ioTestConfig)
	root := t.TempDir()
	write := func(dir string, files ...string) string {
		dir = filepath.Join(root, dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("mine"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, c := range []struct {
		name, dir string
		refused   bool
	}{
		{"new folder", filepath.Join(root, "new"), false},
		{"empty folder", write("empty"), false},
		{"a model's folder", write("hf", "model.safetensors", "config.json", "tokenizer.json"), false},
		{"a run directory", write("run", "config.json", "recipe.lua", "metrics.jsonl"), true},
		{"notes", write("notes", "todo.txt"), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := SaveHF(c.dir, cfg, params)
			if !c.refused {
				if err != nil {
					t.Fatal(err)
				}
				if _, _, _, err := Load(c.dir); err != nil {
					t.Fatalf("saved model does not load: %v", err)
				}
				return
			}
			var se *SaveError
			if !errors.As(err, &se) || se.File != c.dir || len(se.Holds) == 0 {
				t.Fatalf("error %v, want a *SaveError naming what the folder holds", err)
			}
			entries, _ := os.ReadDir(c.dir)
			for _, e := range entries {
				if b, _ := os.ReadFile(filepath.Join(c.dir, e.Name())); string(b) != "mine" {
					t.Errorf("%s was overwritten", e.Name())
				}
			}
		})
	}
}
