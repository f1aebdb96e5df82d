package gpt2

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
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

	const weights, config = "model.safetensors", "config.json"
	for _, c := range []struct {
		name    string
		conf    map[string]any
		tensors []safetensors.Tensor
		file    string   // the file the error names, in the folder
		kind    LoadKind // 0: a safetensors.DTypeError of tensor
		tensor  string   // a prefix of the tensor the error names
		key     string   // BadConfig: the setting at fault
		value   any
	}{
		{"missing tensor", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return slices.DeleteFunc(ts, func(x safetensors.Tensor) bool { return x.Name == "transformer.h.1.mlp.c_fc.bias" })
		}), weights, BadTensor, "transformer.h.1.mlp.c_fc.bias", "", nil},
		{"unknown tensor", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.F32("transformer.h.0.attn.rotary", []int{1}, []float32{0}))
		}), weights, BadTensor, "transformer.h.0.attn.rotary", "", nil},
		{"layer out of range", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.F32("transformer.h.2.ln_1.bias", []int{4}, make([]float32, 4)))
		}), weights, BadTensor, "transformer.h.2.ln_1.bias", "", nil},
		{"wrong shape", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			for i, x := range ts {
				if x.Name == "transformer.h.0.attn.c_attn.weight" {
					ts[i].Shape = []int{12, 4} // (out, in): a checkpoint not in Conv1D orientation
				}
			}
			return ts
		}), weights, BadTensor, "transformer.h.0.attn.c_attn.weight", "", nil},
		{"untied head", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.F32("lm_head.weight", wte.Shape, head))
		}), weights, BadTensor, "lm_head.weight", "", nil},
		{"head shape", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.F32("lm_head.weight", []int{1}, []float32{0}))
		}), weights, BadTensor, "lm_head.weight", "", nil},
		{"duplicate", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.F32("ln_f.bias", []int{4}, make([]float32, 4)))
		}), weights, BadTensor, "transformer.ln_f.bias", "", nil},
		{"integer weights", conf, edit(func(ts []safetensors.Tensor) []safetensors.Tensor {
			ts[0] = safetensors.I32(ts[0].Name, ts[0].Shape, make([]int32, ts[0].NumElements()))
			return ts
		}), weights, 0, "transformer.wte.weight", "", nil},
		{"activation", with("activation_function", "relu"), base, config, BadConfig, "", "activation_function", "relu"},
		{"exact gelu", with("activation_function", "gelu"), base, config, BadConfig, "", "activation_function", "gelu"},
		{"missing n_embd", with("n_embd", nil), base, config, BadConfig, "", "n_embd", nil},
		{"missing positions", func() map[string]any { m := with("n_ctx", nil); delete(m, "n_positions"); return m }(), base, config, BadConfig, "", "n_positions or n_ctx", nil},
		{"non-integer", with("n_head", 2.5), base, config, BadConfig, "", "n_head", jsonValue("number 2.5")},
		{"bad heads", with("n_head", 3), base, config, BadConfig, "", "n_embd", 4},
		{"n_inner", with("n_inner", 7), base, config, BadConfig, "", "n_inner", 7},
		{"untied config", with("tie_word_embeddings", false), base, config, BadConfig, "", "tie_word_embeddings", false},
		{"unscaled attention", with("scale_attn_weights", false), base, config, BadConfig, "", "scale_attn_weights", false},
		{"model type", with("model_type", "llama"), base, config, BadConfig, "", "model_type", "llama"},
		{"model type not a string", with("model_type", 3), base, config, BadConfig, "", "model_type", jsonValue("number")},
		{"flag not a bool", with("tie_word_embeddings", "yes"), base, config, BadConfig, "", "tie_word_embeddings", jsonValue("string")},
		{"epsilon not a number", with("layer_norm_epsilon", "1e-5"), base, config, BadConfig, "", "layer_norm_epsilon", jsonValue("string")},
		{"config shape mismatch", with("n_layer", 3), base, weights, BadTensor, "transformer.h.2.", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := hfTestDir(t, c.conf, c.tensors)
			_, _, err := LoadHF(dir)
			file := filepath.Join(dir, c.file)
			if c.kind == 0 {
				var de *safetensors.DTypeError
				if !errors.As(err, &de) || de.File != file || de.Tensor != c.tensor {
					t.Fatalf("error %v, want a *safetensors.DTypeError of %s in %s", err, c.tensor, file)
				}
				return
			}
			le := wantLoadError(t, err, c.kind, file)
			if !strings.HasPrefix(le.Tensor, c.tensor) || (c.tensor == "") != (le.Tensor == "") {
				t.Errorf("tensor %q, want %q", le.Tensor, c.tensor)
			}
			if c.key != "" {
				wantConfigError(t, err, c.key, c.value)
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
	}{
		{"pickle only", []string{"pytorch_model.bin"}},
		{"sharded", []string{"model.safetensors.index.json"}},
		{"no weights", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := files(t, c.files...)
			_, _, err := LoadHF(dir)
			wantLoadError(t, err, NotAModel, dir)
		})
	}
	t.Run("corrupt weights", func(t *testing.T) {
		dir := files(t, "model.safetensors")
		var fe *safetensors.FormatError
		if _, _, err := LoadHF(dir); !errors.As(err, &fe) || fe.File != filepath.Join(dir, "model.safetensors") {
			t.Errorf("error %v, want a *safetensors.FormatError of its model.safetensors", err)
		}
	})
	t.Run("no config", func(t *testing.T) {
		dir := t.TempDir()
		var pe *fs.PathError
		if _, _, err := LoadHF(dir); !errors.As(err, &pe) || pe.Path != filepath.Join(dir, "config.json") || !errors.Is(err, fs.ErrNotExist) {
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
	var se *SaveError
	if err := SaveHF(tok, cfg, params); !errors.As(err, &se) || se.File != tok || se.Reason != "exists and is not a directory" {
		t.Errorf("saving over a file: %v", err)
	}
}
