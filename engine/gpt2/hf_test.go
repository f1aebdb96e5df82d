package gpt2

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/safetensors"
)

// ioTestConfig is small and has C != 3C != 4C so a transposed matrix cannot pass a shape check.
var ioTestConfig = Config{VocabSize: 11, MaxSeqLen: 5, NumLayers: 2, NumHeads: 2, Channels: 4, LayerNormE: 1e-5}

// ioTestParams gives every parameter a distinct value so a misplaced element shows.
func ioTestParams(cfg Config) []float32 {
	p := make([]float32, NewLayout(cfg).Total)
	for i := range p {
		p[i] = float32(i+1) * 0.001 * float32(1-2*(i%2))
	}
	return p
}

func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// hfTestDir writes an HF directory from a config map and tensors.
func hfTestDir(t *testing.T, conf map[string]any, tensors []safetensors.Tensor) string {
	t.Helper()
	dir := t.TempDir()
	b, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if tensors != nil {
		if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), tensors, nil); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// hfTestConfig is SaveHF's config.json for cfg as a map to edit.
func hfTestConfig(t *testing.T, cfg Config) map[string]any {
	t.Helper()
	b, err := hfConfigBytes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestHFRoundTrip(t *testing.T) {
	cfg, params := ioTestConfig, ioTestParams(ioTestConfig)
	dir := filepath.Join(t.TempDir(), "model")
	if err := SaveHF(dir, cfg, params); err != nil {
		t.Fatal(err)
	}
	gotCfg, got, err := LoadHF(dir)
	if err != nil {
		t.Fatal(err)
	}
	if gotCfg != cfg || !bitsEqual(got, params) {
		t.Fatalf("round trip changed the model: %+v", gotCfg)
	}
	// engine -> HF again gives the same bytes.
	dir2 := filepath.Join(t.TempDir(), "again")
	if err := SaveHF(dir2, gotCfg, got); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors"} {
		a, _ := os.ReadFile(filepath.Join(dir, f))
		b, _ := os.ReadFile(filepath.Join(dir2, f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs between saves", f)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(dir)); len(entries) != 1 {
		t.Errorf("temporary directories left behind: %v", entries)
	}

	// The file is in HF orientation: Conv1D weights (in, out), "transformer." names, no head.
	st, err := safetensors.Read(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	l := NewLayout(cfg)
	if len(st.Tensors) != len(l.Tensors) {
		t.Errorf("%d tensors in the file, want %d", len(st.Tensors), len(l.Tensors))
	}
	if _, ok := st.Tensors["lm_head.weight"]; ok {
		t.Error("lm_head.weight written; the head is tied")
	}
	ours := l.Block(1, "mlp.c_fc.weight") // (4C, C)
	hf := st.Tensors["transformer.h.1.mlp.c_fc.weight"]
	if !slices.Equal(hf.Shape, []int{cfg.Channels, 4 * cfg.Channels}) {
		t.Fatalf("c_fc shape %v", hf.Shape)
	}
	v, _ := hf.Float32s()
	for o := 0; o < 4*cfg.Channels; o++ {
		for i := 0; i < cfg.Channels; i++ {
			if v[i*4*cfg.Channels+o] != params[ours.Off+o*cfg.Channels+i] {
				t.Fatalf("c_fc[%d][%d] not transposed", o, i)
			}
		}
	}
	ln, _ := st.Tensors["transformer.h.0.ln_2.bias"].Float32s()
	if lt := l.Block(0, "ln_2.bias"); !bitsEqual(ln, params[lt.Off:lt.Off+lt.Size]) {
		t.Error("ln_2.bias changed")
	}

	var conf map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"model_type": "gpt2", "activation_function": "gelu_new", "n_inner": nil, "n_ctx": 5.0,
		"n_positions": 5.0, "n_embd": 4.0, "n_layer": 2.0, "n_head": 2.0, "vocab_size": 11.0,
		"layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
		"summary_first_dropout": 0.0, "tie_word_embeddings": true, "bos_token_id": nil, "eos_token_id": nil,
	} {
		if got, ok := conf[k]; !ok || got != want {
			t.Errorf("config.json %s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if a, _ := conf["architectures"].([]any); len(a) != 1 || a[0] != "GPT2LMHeadModel" {
		t.Errorf("architectures %v", conf["architectures"])
	}
	if big := hfTestConfig(t, RookWorld124M); big["bos_token_id"] != 50256.0 || big["eos_token_id"] != 50256.0 {
		t.Errorf("GPT-2 vocabulary: bos %v eos %v, want 50256", big["bos_token_id"], big["eos_token_id"])
	}
}

func TestLoadHFVariants(t *testing.T) {
	cfg, params := ioTestConfig, ioTestParams(ioTestConfig)
	conf := hfTestConfig(t, cfg)
	base := hfTensors(cfg, params)
	wte := NewLayout(cfg).Tensors[0]

	t.Run("GPT2Model names, mask buffers, tied head, dropout", func(t *testing.T) {
		var ts []safetensors.Tensor
		for _, x := range base {
			x.Name = strings.TrimPrefix(x.Name, "transformer.")
			ts = append(ts, x)
		}
		ts = append(ts,
			safetensors.F32("h.0.attn.bias", []int{1, 1, 5, 5}, make([]float32, 25)),
			safetensors.F32("transformer.h.1.attn.masked_bias", nil, []float32{-1e4}),
			safetensors.F32("lm_head.weight", wte.Shape, params[:wte.Size]))
		c := hfTestConfig(t, cfg)
		c["resid_pdrop"], c["embd_pdrop"], c["attn_pdrop"] = 0.1, 0.1, 0.1
		delete(c, "activation_function") // transformers' default is gelu_new
		delete(c, "layer_norm_epsilon")  // and 1e-5
		delete(c, "n_positions")         // legacy configs only have n_ctx
		gotCfg, got, err := LoadHF(hfTestDir(t, c, ts))
		if err != nil {
			t.Fatal(err)
		}
		if gotCfg != cfg || !bitsEqual(got, params) {
			t.Error("params differ")
		}
	})

	// Half-precision checkpoints: values chosen exactly representable so the load is exact.
	for _, dt := range []string{"F16", "BF16"} {
		t.Run(dt, func(t *testing.T) {
			want := make([]float32, len(params))
			for i := range want {
				want[i] = float32(i%97-48) / 64 // |x| <= 0.75 in steps of 2^-6: exact in both
			}
			var ts []safetensors.Tensor
			for _, x := range hfTensors(cfg, want) {
				f, _ := x.Float32s()
				h := safetensors.Tensor{Name: x.Name, DType: dt, Shape: x.Shape, Data: make([]byte, 2*len(f))}
				for i, v := range f {
					bits := uint16(math.Float32bits(v) >> 16) // BF16: exact truncation here
					if dt == "F16" {
						bits = f32ToF16Exact(t, v)
					}
					binary.LittleEndian.PutUint16(h.Data[2*i:], bits)
				}
				ts = append(ts, h)
			}
			_, got, err := LoadHF(hfTestDir(t, conf, ts))
			if err != nil {
				t.Fatal(err)
			}
			if !bitsEqual(got, want) {
				t.Error("params differ")
			}
		})
	}
}

// f32ToF16Exact encodes a float32 that binary16 represents exactly as a normal or zero.
func f32ToF16Exact(t *testing.T, v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	if b&0x7fffffff == 0 {
		return sign
	}
	exp := int(b>>23&0xff) - 127 + 15
	if exp <= 0 || exp >= 31 || b&0x1fff != 0 {
		t.Fatalf("%g is not an exact normal half", v)
	}
	return sign | uint16(exp)<<10 | uint16(b>>13&0x3ff)
}

func TestLoadHFErrors(t *testing.T) {
	cfg, params := ioTestConfig, ioTestParams(ioTestConfig)
	conf := hfTestConfig(t, cfg)
	base := hfTensors(cfg, params)
	edit := func(f func([]safetensors.Tensor) []safetensors.Tensor) []safetensors.Tensor {
		return f(slices.Clone(base))
	}
	wte := NewLayout(cfg).Tensors[0]
	head := slices.Clone(params[:wte.Size])
	head[3] = 7
	with := func(k string, v any) map[string]any {
		m := hfTestConfig(t, cfg)
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}

	for _, c := range []struct {
		name    string
		conf    map[string]any
		tensors []safetensors.Tensor
		want    []string
	}{
		{"missing tensor", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return slices.DeleteFunc(ts, func(x safetensors.Tensor) bool { return x.Name == "transformer.h.1.mlp.c_fc.bias" })
		}), []string{"model.safetensors", "missing tensor", "transformer.h.1.mlp.c_fc.bias"}},
		{"unknown tensor", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.F32("transformer.h.0.attn.rotary", []int{1}, []float32{0}))
		}), []string{"model.safetensors", `unknown tensor "transformer.h.0.attn.rotary"`}},
		{"layer out of range", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.F32("transformer.h.2.ln_1.bias", []int{4}, make([]float32, 4)))
		}), []string{`"transformer.h.2.ln_1.bias" is in layer 2 but config.json has n_layer=2`}},
		{"wrong shape", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			for i, x := range ts {
				if x.Name == "transformer.h.0.attn.c_attn.weight" {
					ts[i].Shape = []int{12, 4} // (out, in): a checkpoint not in Conv1D orientation
				}
			}
			return ts
		}), []string{"model.safetensors", `"transformer.h.0.attn.c_attn.weight"`, "shape [12 4]", "want [4 12]"}},
		{"untied head", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.F32("lm_head.weight", wte.Shape, head))
		}), []string{"model.safetensors", "lm_head.weight", "element 3", "untied"}},
		{"head shape", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.F32("lm_head.weight", []int{1}, []float32{0}))
		}), []string{`"lm_head.weight"`, "shape [1]"}},
		{"duplicate", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.F32("ln_f.bias", []int{4}, make([]float32, 4)))
		}), []string{`"ln_f.bias" given twice`}},
		{"integer weights", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			ts[0] = safetensors.I32(ts[0].Name, ts[0].Shape, make([]int32, ts[0].NumElements()))
			return ts
		}), []string{`"transformer.wte.weight"`, "I32"}},
		{"activation", with("activation_function", "relu"), base, []string{"config.json", "activation_function", `"relu"`}},
		{"exact gelu", with("activation_function", "gelu"), base, []string{"activation_function"}},
		{"missing n_embd", with("n_embd", nil), base, []string{"config.json", "n_embd"}},
		{"missing positions", func() map[string]any { m := with("n_ctx", nil); delete(m, "n_positions"); return m }(), base, []string{"n_positions or n_ctx"}},
		{"non-integer", with("n_head", 2.5), base, []string{"n_head", "integer"}},
		{"bad heads", with("n_head", 3), base, []string{"config.json", "n_embd 4 is not divisible by n_head 3"}},
		{"n_inner", with("n_inner", 7), base, []string{"n_inner"}},
		{"untied config", with("tie_word_embeddings", false), base, []string{"tie_word_embeddings"}},
		{"unscaled attention", with("scale_attn_weights", false), base, []string{"scale_attn_weights"}},
		{"model type", with("model_type", "llama"), base, []string{"model_type"}},
		{"model type not a string", with("model_type", 3), base, []string{"config.json", "model_type must be a string"}},
		{"flag not a bool", with("tie_word_embeddings", "yes"), base, []string{"tie_word_embeddings must be true or false"}},
		{"epsilon not a number", with("layer_norm_epsilon", "1e-5"), base, []string{"layer_norm_epsilon must be a number"}},
		{"config shape mismatch", with("n_layer", 3), base, []string{"missing tensor", "transformer.h.2."}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := hfTestDir(t, c.conf, c.tensors)
			_, _, err := LoadHF(dir)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append(c.want, dir) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}

	files := func(t *testing.T, names ...string) string {
		dir := hfTestDir(t, conf, nil)
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, c := range []struct {
		name  string
		files []string
		want  string
	}{
		{"pickle only", []string{"pytorch_model.bin"}, "only safetensors"},
		{"sharded", []string{"model.safetensors.index.json"}, "sharded"},
		{"no weights", nil, "no model.safetensors"},
		{"corrupt weights", []string{"model.safetensors"}, "model.safetensors: file is 1 bytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := files(t, c.files...)
			if _, _, err := LoadHF(dir); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Errorf("error %v, want mention of %q and %s", err, c.want, dir)
			}
		})
	}
	t.Run("no config", func(t *testing.T) {
		dir := t.TempDir()
		if _, _, err := LoadHF(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "config.json")) {
			t.Errorf("error %v", err)
		}
	})
}

func TestSaveHFExistingDir(t *testing.T) {
	cfg, params := ioTestConfig, ioTestParams(ioTestConfig)
	dir := t.TempDir()
	tok := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(tok, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SaveHF(dir, RookWorld124M, params); err == nil {
		t.Error("params of the wrong size accepted")
	}
	if err := SaveHF(dir, cfg, params); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tok); err != nil {
		t.Errorf("tokenizer.json lost: %v", err)
	}
	if _, got, err := LoadHF(dir); err != nil || !bitsEqual(got, params) {
		t.Errorf("reload: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("files in the directory: %v", entries)
	}
	if err := SaveHF(tok, cfg, params); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("saving over a file: %v", err)
	}
}
