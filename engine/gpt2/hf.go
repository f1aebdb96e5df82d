package gpt2

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rookscript/rookscript/engine/atomicfile"
	"github.com/rookscript/rookscript/engine/safetensors"
)

// Hugging Face GPT-2 checkpoints: config.json + model.safetensors. HF's GPT-2 uses Conv1D
// modules whose weights are stored (in, out), the transpose of our (out, in); these groups are
// transposed on load and save.
var hfConv1D = map[string]bool{
	"attn.c_attn.weight": true, "attn.c_proj.weight": true,
	"mlp.c_fc.weight": true, "mlp.c_proj.weight": true,
}

// hfBuffer matches the causal-mask buffers older transformers versions saved with the weights.
var hfBuffer = regexp.MustCompile(`^h\.[0-9]+\.attn\.(bias|masked_bias)$`)

// hfIsConv1D reports whether the layout tensor name is stored transposed by HF.
func hfIsConv1D(name string) bool {
	if !strings.HasPrefix(name, "h.") {
		return false
	}
	_, group, ok := strings.Cut(name[2:], ".")
	return ok && hfConv1D[group]
}

// hfShape is the shape HF stores tensor t with.
func hfShape(t Tensor) []int {
	if hfIsConv1D(t.Name) {
		return []int{t.Shape[1], t.Shape[0]}
	}
	return t.Shape
}

// LoadHF loads a Hugging Face GPT-2 directory (config.json + model.safetensors, F32/F16/BF16).
// A tensor holding NaN or ±Inf is an error naming it.
func LoadHF(dir string) (Config, []float32, error) {
	cfg, err := readHFConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return Config{}, nil, err
	}
	stPath := filepath.Join(dir, "model.safetensors")
	st, err := safetensors.Read(stPath)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return Config{}, nil, err
		}
		for _, alt := range []struct{ name, why string }{
			{"model.safetensors.index.json", "sharded checkpoints are not supported; save the model as a single model.safetensors"},
			{"pytorch_model.bin", "only safetensors weights are supported (pickle checkpoints are not read); convert it with save_pretrained(safe_serialization=True)"},
		} {
			if _, e := os.Stat(filepath.Join(dir, alt.name)); e == nil {
				return Config{}, nil, &LoadError{Kind: NotAModel, File: dir, Reason: fmt.Sprintf("no model.safetensors but %s: %s", alt.name, alt.why)}
			}
		}
		return Config{}, nil, &LoadError{Kind: NotAModel, File: dir, Reason: "no model.safetensors"}
	}
	params, err := hfParams(st, cfg)
	if err != nil {
		return Config{}, nil, err
	}
	// Folders without the hash (written by transformers or anything else) load unchecked.
	if want, ok := st.Metadata[HFHashKey]; ok {
		if got := ParamsHash(cfg, params); got != want {
			return Config{}, nil, &LoadError{Kind: BadHash, File: stPath, Reason: fmt.Sprintf(
				"the weights and config.json hash to %s, but its %q, written with them by rookscript, records %s: the file is corrupt or was changed since it was saved",
				got, HFHashKey, want)}
		}
	}
	return cfg, params, nil
}

// HFHashKey is the safetensors metadata key under which SaveHF records ParamsHash of the
// model it writes, which LoadHF checks: a flipped bit in the weights, or a config.json that
// no longer matches them, is refused instead of loaded. It lives in the weights file itself,
// so the hash and the weights are replaced together by one atomic rename, and the folder
// stays exactly what transformers reads and writes (which ignores and drops the key).
const HFHashKey = "rookscript.params_hash"

// hfParams copies the tensors of st into a flat buffer in our layout. Every tensor is matched
// to the layout, shape included, before the buffer is allocated: its size comes from
// config.json, and a config that disagrees with the weights must be refused, not allocated.
// Since the file is in memory, the buffer is then at most twice its size (F16 to F32).
func hfParams(st *safetensors.File, cfg Config) ([]float32, error) {
	l := NewLayout(cfg)
	type match struct {
		key string // the name in the file
		lt  Tensor
	}
	var matches []match
	found := make(map[string]string, len(l.Tensors)) // layout name -> file name
	var lmHead *safetensors.Tensor
	for _, key := range st.Names() {
		t := st.Tensors[key]
		name := strings.TrimPrefix(key, "transformer.")
		if name == "lm_head.weight" && key == name {
			lmHead = &t
			continue
		}
		if hfBuffer.MatchString(name) {
			continue
		}
		lt, ok := l.Lookup(name)
		if !ok {
			if m := hfLayer.FindStringSubmatch(name); m != nil {
				if n, _ := strconv.Atoi(m[1]); n >= cfg.NumLayers {
					return nil, badTensor(st, key, "tensor %q is in layer %d but config.json has n_layer=%d", key, n, cfg.NumLayers)
				}
			}
			return nil, badTensor(st, key, "unknown tensor %q (not a GPT-2 parameter of this config)", key)
		}
		if prev, dup := found[name]; dup {
			return nil, badTensor(st, key, "tensor %q given twice (as %q and %q)", name, prev, key)
		}
		found[name] = key
		if want := hfShape(lt); !slices.Equal(t.Shape, want) {
			return nil, badTensor(st, key, "tensor %q has shape %v, want %v (config.json: %s)", key, t.Shape, want, hfShapeFields(lt.Name, cfg))
		}
		matches = append(matches, match{key, lt})
	}
	var missing []string
	for _, lt := range l.Tensors {
		if _, ok := found[lt.Name]; !ok {
			missing = append(missing, "transformer."+lt.Name)
		}
	}
	if len(missing) > 0 {
		if len(missing) > 5 {
			missing = append(missing[:5], fmt.Sprintf("and %d more", len(missing)-5))
		}
		return nil, badTensor(st, missing[0], "missing tensor %s (config.json has n_layer=%d)", strings.Join(missing, ", "), cfg.NumLayers)
	}
	wte, _ := l.Lookup("wte.weight")
	if lmHead != nil && !slices.Equal(lmHead.Shape, wte.Shape) {
		return nil, badTensor(st, "lm_head.weight", "tensor \"lm_head.weight\" has shape %v, want %v", lmHead.Shape, wte.Shape)
	}

	params := make([]float32, l.Total)
	for _, m := range matches {
		lt := m.lt
		dst := params[lt.Off : lt.Off+lt.Size]
		vals := dst
		if hfIsConv1D(lt.Name) {
			vals = make([]float32, lt.Size)
		}
		if err := st.Tensors[m.key].DecodeFloat32(vals); err != nil {
			return nil, err
		}
		if err := checkFinite(m.key, vals); err != nil {
			return nil, &LoadError{Kind: NonFinite, File: st.Path, Tensor: m.key, Err: err}
		}
		if hfIsConv1D(lt.Name) {
			hfTranspose(dst, vals, hfShape(lt)[0], hfShape(lt)[1])
		}
	}
	if lmHead != nil {
		// The engine ties the LM head to wte; a different head would be silently replaced.
		head, err := lmHead.Float32s()
		if err != nil {
			return nil, err
		}
		for i, v := range head {
			if math.Float32bits(v) != math.Float32bits(params[wte.Off+i]) {
				return nil, badTensor(st, "lm_head.weight", "lm_head.weight differs from wte.weight (first at element %d): untied LM heads are not supported", i)
			}
		}
	}
	return params, nil
}

// badTensor is a *LoadError for tensor key of st.
func badTensor(st *safetensors.File, key, format string, a ...any) error {
	return &LoadError{Kind: BadTensor, File: st.Path, Tensor: key, Reason: fmt.Sprintf(format, a...)}
}

// hfLayer matches a block tensor's name and captures its layer.
var hfLayer = regexp.MustCompile(`^h\.([0-9]+)\.`)

// hfShapeFields names the config.json fields a layout tensor's shape comes from, with values.
func hfShapeFields(name string, cfg Config) string {
	switch name {
	case "wte.weight":
		return fmt.Sprintf("vocab_size=%d, n_embd=%d", cfg.VocabSize, cfg.Channels)
	case "wpe.weight":
		return fmt.Sprintf("n_positions=%d, n_embd=%d", cfg.MaxSeqLen, cfg.Channels)
	}
	return fmt.Sprintf("n_embd=%d", cfg.Channels)
}

// hfTranspose writes the (cols, rows) transpose of the row-major (rows, cols) src into dst.
func hfTranspose(dst, src []float32, rows, cols int) {
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			dst[c*rows+r] = src[r*cols+c]
		}
	}
}

// hfConfigFile is what readHFConfig takes from config.json: every key that changes the
// computation. Pointers tell a missing (or null) key from a zero value. Other keys are ignored:
// dropout (resid_pdrop, embd_pdrop, attn_pdrop, summary_first_dropout) because the engine never
// applies dropout, RL logprobs being computed with the model in eval semantics;
// reorder_and_upcast_attn because it only changes numerics, not the function.
type hfConfigFile struct {
	VocabSize                  *int     `json:"vocab_size"`
	NPositions                 *int     `json:"n_positions"` // sizes wpe
	NCtx                       *int     `json:"n_ctx"`       // legacy alias of n_positions
	NEmbd                      *int     `json:"n_embd"`
	NLayer                     *int     `json:"n_layer"`
	NHead                      *int     `json:"n_head"`
	NInner                     *int     `json:"n_inner"`
	LayerNormEpsilon           *float64 `json:"layer_norm_epsilon"`
	ActivationFunction         *string  `json:"activation_function"`
	ModelType                  *string  `json:"model_type"`
	ScaleAttnWeights           *bool    `json:"scale_attn_weights"`
	ScaleAttnByInverseLayerIdx *bool    `json:"scale_attn_by_inverse_layer_idx"`
	AddCrossAttention          *bool    `json:"add_cross_attention"`
	TieWordEmbeddings          *bool    `json:"tie_word_embeddings"`
}

// readHFConfig parses a GPT-2 config.json. Every field that changes the computation is
// checked: a config we would run differently from transformers is an error, not a guess.
func readHFConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	var f hfConfigFile
	if err := json.Unmarshal(b, &f); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Config{}, &LoadError{Kind: BadConfig, File: path, Err: &ConfigError{Key: te.Field, Value: jsonValue(te.Value), Reason: hfKind(te.Type.Kind())}}
		}
		return Config{}, &LoadError{Kind: BadConfig, File: path, Err: err}
	}
	cfg, err := f.validate()
	if err != nil {
		return Config{}, &LoadError{Kind: BadConfig, File: path, Err: err}
	}
	return cfg, nil
}

// hfKind names what a config key must hold, for type errors.
func hfKind(k reflect.Kind) string {
	switch k {
	case reflect.Int:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	}
	return "a string"
}

// validate checks f against what the engine computes and returns the architecture.
func (f hfConfigFile) validate() (Config, error) {
	positions := f.NPositions
	if positions == nil {
		positions = f.NCtx
	}
	for _, r := range []struct {
		v    *int
		name string
	}{{f.VocabSize, "vocab_size"}, {positions, "n_positions or n_ctx"}, {f.NEmbd, "n_embd"},
		{f.NLayer, "n_layer"}, {f.NHead, "n_head"}} {
		if r.v == nil {
			return Config{}, &ConfigError{Key: r.name}
		}
	}
	cfg := Config{VocabSize: *f.VocabSize, MaxSeqLen: *positions, Channels: *f.NEmbd,
		NumLayers: *f.NLayer, NumHeads: *f.NHead, LayerNormE: 1e-5} // transformers' default epsilon
	if f.LayerNormEpsilon != nil {
		cfg.LayerNormE = float32(*f.LayerNormEpsilon)
	}
	// Sizes first: the checks below compute with them.
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	// gelu_pytorch_tanh is the same tanh approximation as gelu_new under another name.
	if act := f.ActivationFunction; act != nil && *act != "gelu_new" && *act != "gelu_pytorch_tanh" {
		return Config{}, &ConfigError{Key: "activation_function", Value: *act, Reason: "gelu_new (tanh-approximated GELU; no other activation is supported)"}
	}
	if mt := f.ModelType; mt != nil && *mt != "gpt2" {
		return Config{}, &ConfigError{Key: "model_type", Value: *mt, Reason: "gpt2"}
	}
	if f.NInner != nil && *f.NInner != 4*cfg.Channels {
		return Config{}, &ConfigError{Key: "n_inner", Value: *f.NInner, Reason: fmt.Sprintf("%d, the standard 4*n_embd (no other MLP is supported)", 4*cfg.Channels)}
	}
	for _, r := range []struct {
		v    *bool
		name string
		want bool
		why  string
	}{
		{f.ScaleAttnWeights, "scale_attn_weights", true, "attention scores must be scaled by 1/sqrt(head size)"},
		{f.ScaleAttnByInverseLayerIdx, "scale_attn_by_inverse_layer_idx", false, "per-layer attention scaling is not supported"},
		{f.AddCrossAttention, "add_cross_attention", false, "cross-attention is not supported"},
		{f.TieWordEmbeddings, "tie_word_embeddings", true, "untied LM heads are not supported"},
	} {
		if r.v != nil && *r.v != r.want {
			return Config{}, &ConfigError{Key: r.name, Value: *r.v, Reason: fmt.Sprintf("%v (%s)", r.want, r.why)}
		}
	}
	return cfg, nil
}

// hfConfigJSON is config.json as transformers' GPT2Config writes it (keys sorted).
type hfConfigJSON struct {
	ActivationFunction         string      `json:"activation_function"`
	Architectures              []string    `json:"architectures"`
	AttnPdrop                  json.Number `json:"attn_pdrop"`
	BosTokenID                 *int        `json:"bos_token_id"`
	EmbdPdrop                  json.Number `json:"embd_pdrop"`
	EosTokenID                 *int        `json:"eos_token_id"`
	InitializerRange           json.Number `json:"initializer_range"`
	LayerNormEpsilon           json.Number `json:"layer_norm_epsilon"`
	ModelType                  string      `json:"model_type"`
	NCtx                       int         `json:"n_ctx"`
	NEmbd                      int         `json:"n_embd"`
	NHead                      int         `json:"n_head"`
	NInner                     *int        `json:"n_inner"`
	NLayer                     int         `json:"n_layer"`
	NPositions                 int         `json:"n_positions"`
	ReorderAndUpcastAttn       bool        `json:"reorder_and_upcast_attn"`
	ResidPdrop                 json.Number `json:"resid_pdrop"`
	ScaleAttnByInverseLayerIdx bool        `json:"scale_attn_by_inverse_layer_idx"`
	ScaleAttnWeights           bool        `json:"scale_attn_weights"`
	SummaryActivation          *string     `json:"summary_activation"`
	SummaryFirstDropout        json.Number `json:"summary_first_dropout"`
	SummaryProjToLabels        bool        `json:"summary_proj_to_labels"`
	SummaryType                string      `json:"summary_type"`
	SummaryUseProj             bool        `json:"summary_use_proj"`
	TieWordEmbeddings          bool        `json:"tie_word_embeddings"`
	TorchDtype                 string      `json:"torch_dtype"`
	UseCache                   bool        `json:"use_cache"`
	VocabSize                  int         `json:"vocab_size"`
}

// hfConfigBytes renders cfg as a transformers GPT2Config. Dropout is written as 0.0 so that
// the checkpoint behaves in PyTorch as it does here even if someone trains it in train mode.
func hfConfigBytes(cfg Config) ([]byte, error) {
	var eot *int
	if cfg.VocabSize >= 50257 {
		eot = new(int)
		*eot = 50256 // <|endoftext|> of the GPT-2 tokenizer
	}
	c := hfConfigJSON{
		ActivationFunction:  "gelu_new",
		Architectures:       []string{"GPT2LMHeadModel"},
		AttnPdrop:           "0.0",
		BosTokenID:          eot,
		EmbdPdrop:           "0.0",
		EosTokenID:          eot,
		InitializerRange:    "0.02",
		LayerNormEpsilon:    json.Number(strconv.FormatFloat(float64(cfg.LayerNormE), 'g', -1, 32)),
		ModelType:           "gpt2",
		NCtx:                cfg.MaxSeqLen,
		NEmbd:               cfg.Channels,
		NHead:               cfg.NumHeads,
		NLayer:              cfg.NumLayers,
		NPositions:          cfg.MaxSeqLen,
		ResidPdrop:          "0.0",
		ScaleAttnWeights:    true,
		SummaryFirstDropout: "0.0",
		SummaryProjToLabels: true,
		SummaryType:         "cls_index",
		SummaryUseProj:      true,
		TieWordEmbeddings:   true,
		TorchDtype:          "float32",
		UseCache:            true,
		VocabSize:           cfg.VocabSize,
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// hfTensors converts params to HF tensors: "transformer." names, Conv1D weights (in, out),
// no lm_head (tied to wte; transformers re-ties it on load).
func hfTensors(cfg Config, params []float32) []safetensors.Tensor {
	l := NewLayout(cfg)
	out := make([]safetensors.Tensor, 0, len(l.Tensors))
	for _, t := range l.Tensors {
		src := params[t.Off : t.Off+t.Size]
		shape := hfShape(t)
		if hfIsConv1D(t.Name) {
			tr := make([]float32, t.Size)
			hfTranspose(tr, src, t.Shape[0], t.Shape[1])
			src = tr
		}
		out = append(out, safetensors.F32("transformer."+t.Name, shape, src))
	}
	return out
}

// SaveHF writes cfg and params as a Hugging Face GPT2LMHeadModel directory (config.json +
// model.safetensors, F32, its metadata holding the content hash under HFHashKey) that
// transformers' from_pretrained loads. Non-finite weights are refused, as they are at load. A
// new directory is built under a temporary name and renamed into place; into an existing
// directory (which may hold tokenizer files worth keeping) each file is replaced atomically,
// weights first; an existing folder that is not empty and holds no model is refused.
func SaveHF(dir string, cfg Config, params []float32) error {
	if err := checkSave(cfg, params); err != nil {
		return &SaveError{File: dir, Err: err}
	}
	conf, err := hfConfigBytes(cfg)
	if err != nil {
		return err
	}
	tensors := hfTensors(cfg, params)
	meta := map[string]string{HFHashKey: ParamsHash(cfg, params)}
	writeBoth := func(d string) error {
		if err := safetensors.Write(filepath.Join(d, "model.safetensors"), tensors, meta); err != nil {
			return err
		}
		return atomicfile.Write(filepath.Join(d, "config.json"), func(w io.Writer) error {
			_, err := w.Write(conf)
			return err
		})
	}

	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return &SaveError{File: dir, Reason: "exists and is not a directory"}
	case err == nil:
		if err := refuseNonModel(dir); err != nil {
			return err
		}
		return writeBoth(dir)
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	clean := filepath.Clean(dir)
	tmp, release, err := atomicfile.TempDir(clean) // also removes what a killed save left
	if err != nil {
		return err
	}
	defer release()
	if err := writeBoth(tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, clean); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(clean))
}

// hfFiles are the files a Hugging Face model folder holds beside its weights.
var hfFiles = []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
	"vocab.json", "merges.txt", "special_tokens_map.json", "added_tokens.json", "README.md", ".gitattributes"}

// refuseNonModel refuses to save into an existing folder that is not a model's: one holding
// model.safetensors, or only the files a model folder has beside it (tokenizer files to keep).
// A run directory's config.json, or a folder of the user's, must never be overwritten.
func refuseNonModel(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var other []string
	for _, e := range entries {
		switch {
		case e.Name() == "model.safetensors":
			return nil
		case !slices.Contains(hfFiles, e.Name()):
			other = append(other, e.Name())
		}
	}
	if len(other) == 0 {
		return nil
	}
	if len(other) > 5 {
		other = append(other[:5], fmt.Sprintf("%d more", len(other)-5))
	}
	return &SaveError{File: dir, Holds: other}
}
