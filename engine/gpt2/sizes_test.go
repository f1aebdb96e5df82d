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
		name string
		mod  func(*Config)
		want string // "" = valid
	}{
		{"GPT-2", func(*Config) {}, ""},
		{"vocab at the bound", func(c *Config) { c.VocabSize = MaxVocabSize }, ""},
		{"vocab above", func(c *Config) { c.VocabSize = MaxVocabSize + 1 }, "vocab_size must be at most 4194304, got 4194305"},
		{"positions at the bound", func(c *Config) { c.MaxSeqLen = MaxPositions }, ""},
		{"positions 1e12", func(c *Config) { c.MaxSeqLen = 1e12 }, "n_positions must be at most 1048576, got 1000000000000"},
		{"layers at the bound", func(c *Config) { c.NumLayers = MaxLayers }, ""},
		{"layers above", func(c *Config) { c.NumLayers = MaxLayers + 1 }, "n_layer must be at most 1024, got 1025"},
		{"channels at the bound", func(c *Config) { c.Channels, c.NumHeads = MaxChannels, 16 }, ""},
		{"channels above", func(c *Config) { c.Channels = 2 * MaxChannels }, "n_embd must be at most 65536, got 131072"},
		{"heads above channels", func(c *Config) { c.NumHeads = 1536 }, "n_embd 768 is not divisible by n_head 1536"},
		{"heads above the bound", func(c *Config) { c.NumHeads = MaxChannels + 1 }, "n_head must be at most 65536"},
		{"negative positions", func(c *Config) { c.MaxSeqLen = -1 }, "n_positions must be positive, got -1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := RookWorld124M
			c.mod(&cfg)
			err := cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Validate() = %v, want %q", err, c.want)
			}
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
		name  string
		write func(t *testing.T) string
		want  []string
	}{
		// n_positions and n_ctx both: the legacy key must not be the way around the bound.
		{"hf n_positions = 1e12", hf(with("n_positions", 1_000_000_000_000, "n_ctx", 1_000_000_000_000)),
			[]string{"config.json", "n_positions must be at most 1048576, got 1000000000000"}},
		{"hf n_positions = 1e12 written as a float", hf(with("n_positions", json.Number("1e12"))),
			[]string{"config.json", "n_positions must be an integer, got number 1e12"}},
		{"hf n_embd above the bound", hf(with("n_embd", 1<<20)), []string{"config.json", "n_embd must be at most 65536"}},
		{"hf n_layer above the bound", hf(with("n_layer", 1<<20)), []string{"config.json", "n_layer must be at most 1024"}},
		{"hf vocab above the bound", hf(with("vocab_size", 1<<30)), []string{"config.json", "vocab_size must be at most 4194304"}},
		{"hf n_head above n_embd", hf(with("n_head", 8)), []string{"config.json", "n_embd 4 is not divisible by n_head 8"}},
		{"hf n_head 0", hf(with("n_head", 0)), []string{"config.json", "n_head must be positive"}},
		{"hf more positions than wpe has", hf(with("n_positions", MaxPositions)),
			[]string{"model.safetensors", `"transformer.wpe.weight" has shape [5 4], want [1048576 4]`, "config.json: n_positions=1048576, n_embd=4"}},
		{"hf larger vocabulary than wte has", hf(with("vocab_size", MaxVocabSize)),
			[]string{"model.safetensors", `"transformer.wte.weight" has shape [11 4], want [4194304 4]`, "vocab_size=4194304"}},
		{"hf wider than the weights", hf(with("n_embd", MaxChannels, "n_head", 2)), // 400 GB of parameters
			[]string{"model.safetensors", "want [", "config.json: ", "n_embd=65536"}},
		{"hf more layers than the weights", hf(with("n_layer", MaxLayers)),
			[]string{"model.safetensors", "missing tensor transformer.h.2.", "config.json has n_layer=1024"}},
		{"llm.c n_positions above the bound", llmc(2, 1<<30), []string{"header: n_positions must be at most 1048576"}},
		{"llm.c more positions than the file has", llmc(2, MaxPositions), []string{"T=1048576", "implies"}},
		{"llm.c more layers than the file has", llmc(4, MaxLayers), []string{"L=1024", "implies"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := c.write(t)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, p, _, err := Load(path)
			runtime.ReadMemStats(&after)
			if err == nil {
				t.Fatal("loaded")
			}
			if p != nil {
				t.Error("parameters returned with the error")
			}
			for _, w := range append(c.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			// The file is a few kB; the config's buffer would be 80 MB or more.
			if n := after.TotalAlloc - before.TotalAlloc; n > 8<<20 {
				t.Errorf("refusing it allocated %d bytes", n)
			}
		})
	}
}
