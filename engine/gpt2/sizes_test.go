package gpt2

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Each size has a bound (config.go): at the bound a config is valid, above it refused naming
// the field, whatever the weights would say.
func TestConfigBounds(t *testing.T) {
	for _, c := range []struct {
		name  string
		mod   func(*Config)
		key   string // "" = valid
		value int
	}{
		{"GPT-2", func(*Config) {}, "", 0},
		{"vocab at the bound", func(c *Config) { c.VocabSize = MaxVocabSize }, "", 0},
		{"vocab above", func(c *Config) { c.VocabSize = MaxVocabSize + 1 }, "vocab_size", MaxVocabSize + 1},
		{"positions at the bound", func(c *Config) { c.MaxSeqLen = MaxPositions }, "", 0},
		{"positions 1e12", func(c *Config) { c.MaxSeqLen = 1e12 }, "n_positions", 1e12},
		{"layers at the bound", func(c *Config) { c.NumLayers = MaxLayers }, "", 0},
		{"layers above", func(c *Config) { c.NumLayers = MaxLayers + 1 }, "n_layer", MaxLayers + 1},
		{"channels at the bound", func(c *Config) { c.Channels, c.NumHeads = MaxChannels, 16 }, "", 0},
		{"channels above", func(c *Config) { c.Channels = 2 * MaxChannels }, "n_embd", 2 * MaxChannels},
		{"heads above channels", func(c *Config) { c.NumHeads = 1536 }, "n_embd", 768}, // not a multiple of n_head
		{"heads above the bound", func(c *Config) { c.NumHeads = MaxChannels + 1 }, "n_head", MaxChannels + 1},
		{"negative positions", func(c *Config) { c.MaxSeqLen = -1 }, "n_positions", -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := RookWorld124M
			c.mod(&cfg)
			err := cfg.Validate()
			if c.key == "" {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			wantConfigError(t, err, c.key, c.value)
		})
	}
	// The largest config within every bound has a parameter count an int holds.
	huge := Config{VocabSize: MaxVocabSize, MaxSeqLen: MaxPositions, NumLayers: MaxLayers, NumHeads: 1, Channels: MaxChannels, LayerNormE: 1e-5}
	c := float64(MaxChannels)
	want := c*(MaxVocabSize+MaxPositions) + MaxLayers*(12*c*c+13*c) + 2*c
	if got := NewLayout(huge).Total; got <= 0 || float64(got) != want {
		t.Errorf("parameter count of the largest config is %d, want %.0f", got, want)
	}
}

// A config whose sizes the weights file does not have is refused before the loader allocates
// a buffer of the config's size: the cases below would need from 80 MB to 400 GB. Errors name
// the file and the field.
func TestLoadRefusesConfigNotMatchingWeights(t *testing.T) {
	cfg, params := ioTestConfig, ioTestParams(ioTestConfig)
	tensors := hfTensors(cfg, params)
	with := func(kv ...any) map[string]any {
		m := hfTestConfig(t, cfg)
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	hf := func(conf map[string]any) func(t *testing.T) string {
		return func(t *testing.T) string { return hfTestDir(t, conf, tensors) }
	}
	llmc := func(field int, v int32) func(t *testing.T) string {
		return func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "model.bin")
			if err := SaveLLMC(path, cfg, params); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(path)
			binary.LittleEndian.PutUint32(b[4*field:], uint32(v))
			os.WriteFile(path, b, 0o644)
			return path
		}
	}
	for _, c := range []struct {
		name   string
		write  func(t *testing.T) string
		file   string // the file in the folder the error names; "" for an llm.c file
		kind   LoadKind
		key    string // BadConfig: the setting at fault, and its value
		value  any
		tensor string // BadTensor: a prefix of the tensor at fault
	}{
		// n_positions and n_ctx both: the legacy key must not be the way around the bound.
		{"hf n_positions = 1e12", hf(with("n_positions", 1_000_000_000_000, "n_ctx", 1_000_000_000_000)),
			"config.json", BadConfig, "n_positions", 1_000_000_000_000, ""},
		{"hf n_positions = 1e12 written as a float", hf(with("n_positions", json.Number("1e12"))),
			"config.json", BadConfig, "n_positions", jsonValue("number 1e12"), ""},
		{"hf n_embd above the bound", hf(with("n_embd", 1<<20)), "config.json", BadConfig, "n_embd", 1 << 20, ""},
		{"hf n_layer above the bound", hf(with("n_layer", 1<<20)), "config.json", BadConfig, "n_layer", 1 << 20, ""},
		{"hf vocab above the bound", hf(with("vocab_size", 1<<30)), "config.json", BadConfig, "vocab_size", 1 << 30, ""},
		{"hf n_head above n_embd", hf(with("n_head", 8)), "config.json", BadConfig, "n_embd", 4, ""},
		{"hf n_head 0", hf(with("n_head", 0)), "config.json", BadConfig, "n_head", 0, ""},
		{"hf more positions than wpe has", hf(with("n_positions", MaxPositions)), "model.safetensors", BadTensor, "", nil, "transformer.wpe.weight"},
		{"hf larger vocabulary than wte has", hf(with("vocab_size", MaxVocabSize)), "model.safetensors", BadTensor, "", nil, "transformer.wte.weight"},
		{"hf wider than the weights", hf(with("n_embd", MaxChannels, "n_head", 2)), // 400 GB of parameters
			"model.safetensors", BadTensor, "", nil, "transformer."},
		{"hf more layers than the weights", hf(with("n_layer", MaxLayers)), "model.safetensors", BadTensor, "", nil, "transformer.h.2."},
		{"llm.c n_positions above the bound", llmc(2, 1<<30), "", BadConfig, "n_positions", 1 << 30, ""},
		{"llm.c more positions than the file has", llmc(2, MaxPositions), "", BadSize, "", nil, ""},
		{"llm.c more layers than the file has", llmc(4, MaxLayers), "", BadSize, "", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := c.write(t)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, p, _, err := Load(path)
			runtime.ReadMemStats(&after)
			if p != nil {
				t.Error("parameters returned with the error")
			}
			le := wantLoadError(t, err, c.kind, filepath.Join(path, c.file))
			if c.key != "" {
				wantConfigError(t, err, c.key, c.value)
			}
			if !strings.HasPrefix(le.Tensor, c.tensor) || (c.tensor == "") != (le.Tensor == "") {
				t.Errorf("tensor %q, want %q", le.Tensor, c.tensor)
			}
			// The file is a few kB; the config's buffer would be 80 MB or more.
			if n := after.TotalAlloc - before.TotalAlloc; n > 8<<20 {
				t.Errorf("refusing it allocated %d bytes", n)
			}
		})
	}
}
