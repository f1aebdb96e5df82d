package gpt2

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rookscript/rookscript/engine/safetensors"
)

// Weights holding NaN or ±Inf are refused at load, naming the tensor and the first bad
// element in the file's order, whatever the format and dtype.
func TestLoadRefusesNonFiniteWeights(t *testing.T) {
	cfg, params := ioTestConfig, ioTestParams(ioTestConfig)
	l := NewLayout(cfg)

	// hf writes the HF directory with one tensor replaced: its element i set to the raw bits
	// of dtype (F32 bits, or F16/BF16 bits in a tensor of that dtype, the rest zero).
	hf := func(name, dtype string, i int, bits uint32) func(t *testing.T) string {
		return func(t *testing.T) string {
			ts := hfTensors(cfg, params)
			k := slices.IndexFunc(ts, func(x safetensors.Tensor) bool { return x.Name == name })
			if k < 0 {
				t.Fatalf("no tensor %q", name)
			}
			x := ts[k]
			switch dtype {
			case "F32":
				x.Data = slices.Clone(x.Data)
				binary.LittleEndian.PutUint32(x.Data[4*i:], bits)
			default:
				x = safetensors.Tensor{Name: name, DType: dtype, Shape: x.Shape, Data: make([]byte, 2*x.NumElements())}
				binary.LittleEndian.PutUint16(x.Data[2*i:], uint16(bits))
			}
			ts[k] = x
			return hfTestDir(t, hfTestConfig(t, cfg), ts)
		}
	}
	// llmc writes an llm.c checkpoint with layout tensor name's element i set to v, in the
	// file (SaveLLMC refuses to write it).
	llmc := func(name string, i int, v float32) func(t *testing.T) string {
		return func(t *testing.T) string {
			lt, ok := l.Lookup(name)
			if !ok {
				t.Fatalf("no tensor %q", name)
			}
			path := filepath.Join(t.TempDir(), "model.bin")
			if err := SaveLLMCPadded(path, cfg, params, 1); err != nil { // unpadded: file order is Layout order
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			binary.LittleEndian.PutUint32(b[llmcHeaderBytes+4*(lt.Off+i):], math.Float32bits(v))
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}
	}
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		name    string
		write   func(t *testing.T) string
		tensor  string
		element int
		value   float32
	}{
		{"hf F32 NaN in a Conv1D weight (file order)", hf("transformer.h.1.mlp.c_fc.weight", "F32", 5, math.Float32bits(nan)),
			"transformer.h.1.mlp.c_fc.weight", 5, nan},
		{"hf F32 -Inf in a bias", hf("transformer.ln_f.bias", "F32", 2, math.Float32bits(-inf)), "transformer.ln_f.bias", 2, -inf},
		{"hf BF16 +Inf in wte", hf("transformer.wte.weight", "BF16", 0, 0x7f80), "transformer.wte.weight", 0, inf},
		{"hf F16 NaN", hf("transformer.h.0.attn.c_attn.bias", "F16", 1, 0x7e00), "transformer.h.0.attn.c_attn.bias", 1, nan},
		{"llm.c +Inf", llmc("h.0.attn.c_proj.weight", 3, inf), "h.0.attn.c_proj.weight", 3, inf},
		{"llm.c NaN in wpe", llmc("wpe.weight", 0, nan), "wpe.weight", 0, nan},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := c.write(t)
			_, _, _, err := Load(path)
			var le *LoadError
			var nf *NonFiniteError
			if !errors.As(err, &le) || le.Kind != NonFinite || le.Tensor != c.tensor ||
				(le.File != path && le.File != filepath.Join(path, "model.safetensors")) || !errors.As(err, &nf) {
				t.Fatalf("error %v, want a *LoadError of kind NonFinite naming %s and %s", err, path, c.tensor)
			}
			sameValue := nf.Value == c.value || nf.Value != nf.Value && c.value != c.value // NaN is NaN
			if nf.Tensor != c.tensor || nf.Element != c.element || !sameValue {
				t.Errorf("%+v, want %s[%d] = %v", *nf, c.tensor, c.element, c.value)
			}
		})
	}
}
