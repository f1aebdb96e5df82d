package gpt2

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Source describes where a model's weights came from; callers log Description and record it
// with the run so a reference model can be reloaded and checked.
type Source struct {
	Kind        string // "hf", "llmc" or "random"
	Path        string // the path as given, or the canonical random spec ("random:tiny@seed=7")
	Random      bool   // the weights are a random initialisation, not a trained model
	Seed        uint64 // the init seed when Random
	Description string // one line for logs; says RANDOM loudly for random weights
}

// RandomConfigs are the architectures a random model can be asked for by name ("random:<name>").
// Both use the real GPT-2 vocabulary so they run with the stock tokenizer.
var RandomConfigs = map[string]Config{
	"124m": RookWorld124M,
	"tiny": {VocabSize: 50257, MaxSeqLen: 256, NumLayers: 2, NumHeads: 2, Channels: 64, LayerNormE: 1e-5},
	// small is the architecture of the embedded default model (scripts/defaultmodel.lua):
	// 7.3M parameters, most of them the GPT-2 vocabulary's embeddings.
	"small": {VocabSize: 50257, MaxSeqLen: 256, NumLayers: 4, NumHeads: 4, Channels: 128, LayerNormE: 1e-5},
}

// DefaultRandomSeed is the init seed of "random:<name>" without "@seed=" (llm.c's init seed).
const DefaultRandomSeed = 42

// Load loads a model from source:
//
//	a directory with config.json         Hugging Face GPT-2 (model.safetensors)
//	a model.safetensors or config.json   the Hugging Face directory holding it
//	a file starting with llm.c's magic   llm.c checkpoint
//	random:<name>[@seed=<n>]             random init of a RandomConfigs architecture
//
// A path that does not exist is an error: random weights are only ever produced on request.
// Errors that concern the source are *LoadError, naming what is wrong, the file and the tensor.
func Load(source string) (Config, []float32, Source, error) {
	if spec, ok := strings.CutPrefix(source, "random:"); ok {
		return loadRandom(spec)
	}
	if source == "" {
		return Config{}, nil, Source{}, &LoadError{Kind: NotFound, Reason: "empty model path"}
	}
	fi, err := os.Stat(source)
	if errors.Is(err, os.ErrNotExist) {
		return Config{}, nil, Source{}, &LoadError{Kind: NotFound, File: source}
	}
	if err != nil {
		return Config{}, nil, Source{}, err
	}
	hf := func(dir string) (Config, []float32, Source, error) {
		cfg, params, err := LoadHF(dir)
		if err != nil {
			return Config{}, nil, Source{}, err
		}
		return cfg, params, Source{Kind: "hf", Path: source,
			Description: fmt.Sprintf("Hugging Face GPT-2 checkpoint %s (%s)", source, describeConfig(cfg))}, nil
	}
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(source, "config.json")); err != nil {
			return Config{}, nil, Source{}, &LoadError{Kind: NotFound, File: source, Reason: "is a directory without config.json (want a Hugging Face GPT-2 directory)"}
		}
		return hf(source)
	}
	switch filepath.Base(source) {
	case "model.safetensors", "config.json":
		return hf(filepath.Dir(source))
	}
	var magic [4]byte
	f, err := os.Open(source)
	if err != nil {
		return Config{}, nil, Source{}, err
	}
	_, err = io.ReadFull(f, magic[:])
	f.Close()
	switch {
	case err == nil && binary.LittleEndian.Uint32(magic[:]) == LLMCMagic:
		cfg, params, err := LoadLLMC(source)
		if err != nil {
			return Config{}, nil, Source{}, err
		}
		return cfg, params, Source{Kind: "llmc", Path: source,
			Description: fmt.Sprintf("llm.c checkpoint %s (%s)", source, describeConfig(cfg))}, nil
	case err == nil && string(magic[:2]) == "PK":
		return Config{}, nil, Source{}, &LoadError{Kind: NotAModel, File: source, Reason: "looks like a PyTorch pickle checkpoint; only safetensors and llm.c checkpoints are supported"}
	}
	return Config{}, nil, Source{}, &LoadError{Kind: NotAModel, File: source, Reason: "not a model: want a Hugging Face GPT-2 directory, an llm.c checkpoint or random:<name>"}
}

// checkFinite refuses a tensor holding NaN or ±Inf, naming it and the first bad element in
// the file's order. A model with such weights turns every logit, loss and reward to NaN; it
// is refused at load rather than discovered steps later.
func checkFinite(name string, v []float32) error {
	for i, x := range v {
		if x-x != 0 { // NaN or ±Inf
			return &NonFiniteError{Tensor: name, Element: i, Value: x}
		}
	}
	return nil
}

// checkSave refuses to write what a loader would refuse: a config the engine cannot run,
// params of the wrong count, non-finite weights (named as the load check names them).
func checkSave(cfg Config, params []float32) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l := NewLayout(cfg)
	if len(params) != l.Total {
		return fmt.Errorf("%d params, config needs %d", len(params), l.Total)
	}
	for _, t := range l.Tensors {
		if err := checkFinite(t.Name, params[t.Off:t.Off+t.Size]); err != nil {
			return err
		}
	}
	return nil
}

// loadRandom parses "<name>[@seed=<n>]" and initialises that architecture.
func loadRandom(spec string) (Config, []float32, Source, error) {
	name, opt, hasOpt := strings.Cut(spec, "@")
	cfg, ok := RandomConfigs[name]
	if !ok {
		names := make([]string, 0, len(RandomConfigs))
		for n := range RandomConfigs {
			names = append(names, n)
		}
		sort.Strings(names)
		return Config{}, nil, Source{}, &LoadError{Kind: BadSpec, File: "random:" + spec,
			Reason: fmt.Sprintf("unknown random model %q; known: %s", name, strings.Join(names, ", "))}
	}
	seed := uint64(DefaultRandomSeed)
	if hasOpt {
		v, found := strings.CutPrefix(opt, "seed=")
		n, err := strconv.ParseUint(v, 10, 64)
		if !found || err != nil {
			return Config{}, nil, Source{}, &LoadError{Kind: BadSpec, File: "random:" + spec, Reason: fmt.Sprintf("want random:%s@seed=<unsigned integer>", name)}
		}
		seed = n
	}
	canon := fmt.Sprintf("random:%s@seed=%d", name, seed)
	return cfg, RandomParams(cfg, seed), Source{Kind: "random", Path: canon, Random: true, Seed: seed,
		Description: fmt.Sprintf("RANDOM weights (random:%s, seed %d) — not a trained model (%s)", name, seed, describeConfig(cfg))}, nil
}

func describeConfig(cfg Config) string {
	return fmt.Sprintf("L=%d NH=%d C=%d V=%d T=%d, %.2fM params", cfg.NumLayers, cfg.NumHeads,
		cfg.Channels, cfg.VocabSize, cfg.MaxSeqLen, float64(NewLayout(cfg).Total)/1e6)
}

// RandomParams initialises cfg as GPT-2 / nanoGPT do: weights and embeddings N(0, 0.02), the
// residual projections (attn.c_proj.weight, mlp.c_proj.weight) N(0, 0.02/sqrt(2·L)), biases 0,
// LayerNorm weights 1 and biases 0.
//
// The values are a pure function of (cfg, seed), identical on every platform: xoshiro256**
// seeded by splitmix64(seed) yields 53-bit uniforms, Marsaglia's polar method turns pairs of
// them into normals (both used, in order) with only correctly rounded float64 operations and
// fdlibm's log written out below, and the normals, times the std and rounded to float32, fill
// the weight tensors in Layout order, row-major.
func RandomParams(cfg Config, seed uint64) []float32 {
	l := NewLayout(cfg)
	p := make([]float32, l.Total)
	rng := newInitRNG(seed)
	resid := 0.02 / math.Sqrt(float64(2*cfg.NumLayers))
	for _, t := range l.Tensors {
		dst := p[t.Off : t.Off+t.Size]
		_, group, _ := strings.Cut(strings.TrimPrefix(t.Name, "h."), ".")
		switch {
		case group == "attn.c_proj.weight" || group == "mlp.c_proj.weight":
			rng.fill(dst, resid)
		case t.IsMatrix(): // wte, wpe, c_attn, c_fc
			rng.fill(dst, 0.02)
		case strings.HasSuffix(t.Name, "ln_1.weight"), strings.HasSuffix(t.Name, "ln_2.weight"), t.Name == "ln_f.weight":
			for i := range dst {
				dst[i] = 1
			}
		}
	}
	return p
}

// initRNG is xoshiro256** (Blackman & Vigna) with a cached second polar normal.
type initRNG struct {
	s        [4]uint64
	spare    float64
	hasSpare bool
}

func newInitRNG(seed uint64) *initRNG {
	r := &initRNG{}
	for i := range r.s {
		// splitmix64
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		r.s[i] = z ^ z>>31
	}
	return r
}

func (r *initRNG) next() uint64 {
	s := &r.s
	out := bits.RotateLeft64(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bits.RotateLeft64(s[3], 45)
	return out
}

// normal returns a standard normal. Every product is wrapped in float64() so that no compiler
// fuses it into an FMA, which would change results between architectures.
func (r *initRNG) normal() float64 {
	if r.hasSpare {
		r.hasSpare = false
		return r.spare
	}
	for {
		u := float64(float64(r.next()>>11)*0x1p-52) - 1 // uniform on [-1, 1), exact
		v := float64(float64(r.next()>>11)*0x1p-52) - 1
		s := float64(u*u) + float64(v*v)
		if s == 0 || s >= 1 {
			continue
		}
		f := math.Sqrt(-2 * detLog(s) / s)
		r.spare, r.hasSpare = float64(v*f), true
		return float64(u * f)
	}
}

func (r *initRNG) fill(dst []float32, std float64) {
	for i := range dst {
		dst[i] = float32(float64(r.normal() * std))
	}
}

// detLog is ln(x) for finite x > 0 built from correctly rounded operations only, so it gives
// the same bits on every platform (math.Log has per-architecture assembly, and the compiler may
// fuse products into FMAs; every product here is wrapped in float64() to forbid that). It is
// fdlibm's e_log.c: x = (1+f)·2^k with 1+f in [√½, √2), s = f/(2+f), and
// ln(1+f) = f - s·(f - R(s²)) with a minimax polynomial R; error below 1 ulp.
func detLog(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01 // 0x3fe62e42fee00000
		ln2Lo = 1.90821492927058770002e-10 // 0x3dea39ef35793c76
		lg1   = 6.666666666666735130e-01
		lg2   = 3.999999999940941908e-01
		lg3   = 2.857142874366239149e-01
		lg4   = 2.222219843214978396e-01
		lg5   = 1.818357216161805012e-01
		lg6   = 1.531383769920937332e-01
		lg7   = 1.479819860511658591e-01
	)
	m, e := math.Frexp(x)
	if m < math.Sqrt2/2 {
		m *= 2
		e--
	}
	f, k := m-1, float64(e)
	s := f / (2 + f)
	s2 := float64(s * s)
	s4 := float64(s2 * s2)
	t1 := float64(s2 * (lg1 + float64(s4*(lg3+float64(s4*(lg5+float64(s4*lg7)))))))
	t2 := float64(s4 * (lg2 + float64(s4*(lg4+float64(s4*lg6)))))
	r := t1 + t2
	hfsq := float64(float64(0.5*f) * f)
	return float64(k*ln2Hi) - ((hfsq - (float64(s*(hfsq+r)) + float64(k*ln2Lo))) - f)
}

// ParamsHash identifies a model's exact weights: hex SHA-256 over a versioned canonical
// encoding of cfg, the parameter count and every parameter's float32 bits, little-endian.
func ParamsHash(cfg Config, params []float32) string {
	h := sha256.New()
	fmt.Fprintf(h, "rookscript/gpt2 params v1\nvocab_size=%d n_positions=%d n_layer=%d n_head=%d n_embd=%d layer_norm_epsilon=0x%08x n_params=%d\n",
		cfg.VocabSize, cfg.MaxSeqLen, cfg.NumLayers, cfg.NumHeads, cfg.Channels, math.Float32bits(cfg.LayerNormE), len(params))
	buf := make([]byte, 1<<16)
	for len(params) > 0 {
		n := min(len(params), len(buf)/4)
		for i, v := range params[:n] {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
		}
		h.Write(buf[:4*n])
		params = params[n:]
	}
	return hex.EncodeToString(h.Sum(nil))
}
