package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/optim"
)

// stateFormat names the version of state.json's schema.
const stateFormat = "rookscript-checkpoint/1"

// envelope is state.json: the state plus the sha256 of its exact bytes, so a flipped byte
// that still parses (a digit of the step, the cursor) is refused too.
type envelope struct {
	Format string          `json:"format"`
	SHA256 string          `json:"state_sha256"`
	State  json.RawMessage `json:"state"`
}

type fileState struct {
	Step       int                        `json:"step"`
	Time       time.Time                  `json:"time"`
	Model      fileConfig                 `json:"model"`
	ParamsHash string                     `json:"params_hash"`
	Optimizer  fileOptimizer              `json:"optimizer"`
	RNG        map[string]json.RawMessage `json:"rng"`
	Cursor     json.RawMessage            `json:"cursor"`
	Recipe     json.RawMessage            `json:"recipe"`
	Config     json.RawMessage            `json:"config"`
	Settings   json.RawMessage            `json:"settings,omitempty"` // written by older versions; read and ignored
	Kernels    string                     `json:"kernels,omitempty"`  // absent in checkpoints written before it was recorded
	Reference  fileIdentity               `json:"reference"`
	Metrics    metricMap                  `json:"metrics"`
	// MetricsBytes is absent in checkpoints written before it was recorded.
	MetricsBytes *int64               `json:"metrics_bytes,omitempty"`
	Retention    fileRetention        `json:"retention"`
	Files        map[string]fileEntry `json:"files"` // path relative to the checkpoint, "/"-separated
}

// fileConfig is a gpt2.Config under Hugging Face's names.
type fileConfig struct {
	VocabSize  int         `json:"vocab_size"`
	MaxSeqLen  int         `json:"n_positions"`
	NumLayers  int         `json:"n_layer"`
	NumHeads   int         `json:"n_head"`
	Channels   int         `json:"n_embd"`
	LayerNormE json.Number `json:"layer_norm_epsilon"` // shortest float32 form: 1e-05, not 9.99999974737875e-06
}

func toFileConfig(c gpt2.Config) fileConfig {
	eps := json.Number(strconv.FormatFloat(float64(c.LayerNormE), 'g', -1, 32))
	return fileConfig{c.VocabSize, c.MaxSeqLen, c.NumLayers, c.NumHeads, c.Channels, eps}
}

// config converts back; an unparsable epsilon becomes 0, which Config.Validate refuses.
func (c fileConfig) config() gpt2.Config {
	eps, _ := strconv.ParseFloat(string(c.LayerNormE), 32)
	return gpt2.Config{VocabSize: c.VocabSize, MaxSeqLen: c.MaxSeqLen, NumLayers: c.NumLayers,
		NumHeads: c.NumHeads, Channels: c.Channels, LayerNormE: float32(eps)}
}

type fileOptimizer struct {
	Kind        string  `json:"kind"`
	LR          float64 `json:"lr"`
	Beta1       float64 `json:"beta1"`
	Beta2       float64 `json:"beta2"`
	Eps         float64 `json:"eps"`
	WeightDecay float64 `json:"weight_decay"`
	DecayAll    bool    `json:"decay_all"`
	Steps       int     `json:"steps"`
	// Base is OptimizerState.Base, absent when not recorded.
	Base *fileAdamW `json:"base,omitempty"`
}

type fileAdamW struct {
	LR          float64 `json:"lr"`
	Beta1       float64 `json:"beta1"`
	Beta2       float64 `json:"beta2"`
	Eps         float64 `json:"eps"`
	WeightDecay float64 `json:"weight_decay"`
	DecayAll    bool    `json:"decay_all"`
}

type fileIdentity struct {
	Source string     `json:"source"`
	Kind   string     `json:"kind"`
	Random bool       `json:"random"`
	Model  fileConfig `json:"model"`
	Hash   string     `json:"hash"`
	Syncs  []fileSync `json:"syncs"`
	// PolicyStart is absent unless set.
	PolicyStart string `json:"policy_start,omitempty"`
}

type fileSync struct {
	Step  int       `json:"step"`
	Hash  string    `json:"hash"`
	Time  time.Time `json:"time"`
	Alpha float64   `json:"alpha,omitempty"` // absent for a copy of the policy
}

type fileRetention struct {
	KeepLast   int    `json:"keep_last"`
	BestMetric string `json:"best_metric,omitempty"`
	BestMode   string `json:"best_mode,omitempty"`
}

type fileEntry struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

func toFileIdentity(id Identity) fileIdentity {
	f := fileIdentity{Source: id.Source, Kind: id.Kind, Random: id.Random, Model: toFileConfig(id.Config),
		Hash: id.Hash, Syncs: []fileSync{}, PolicyStart: id.PolicyStart}
	for _, s := range id.Syncs {
		f.Syncs = append(f.Syncs, fileSync(s))
	}
	return f
}

func (f fileIdentity) identity() Identity {
	id := Identity{Source: f.Source, Kind: f.Kind, Random: f.Random, Config: f.Model.config(), Hash: f.Hash, PolicyStart: f.PolicyStart}
	for _, s := range f.Syncs {
		id.Syncs = append(id.Syncs, Sync(s))
	}
	return id
}

func toFileOptimizer(o OptimizerState) fileOptimizer {
	c := o.Config
	f := fileOptimizer{Kind: "adamw", LR: c.LR, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps,
		WeightDecay: c.WeightDecay, DecayAll: c.DecayAll, Steps: o.Steps}
	if b := o.Base; b != (optim.AdamWConfig{}) {
		f.Base = &fileAdamW{b.LR, b.Beta1, b.Beta2, b.Eps, b.WeightDecay, b.DecayAll}
	}
	return f
}

func (f fileOptimizer) config() optim.AdamWConfig {
	return optim.AdamWConfig{LR: f.LR, Beta1: f.Beta1, Beta2: f.Beta2, Eps: f.Eps, WeightDecay: f.WeightDecay, DecayAll: f.DecayAll}
}

// base is the recorded Base, zero when absent.
func (f fileOptimizer) base() optim.AdamWConfig {
	if f.Base == nil {
		return optim.AdamWConfig{}
	}
	b := f.Base
	return optim.AdamWConfig{LR: b.LR, Beta1: b.Beta1, Beta2: b.Beta2, Eps: b.Eps, WeightDecay: b.WeightDecay, DecayAll: b.DecayAll}
}

// encodeState renders state.json.
func encodeState(fs *fileState) ([]byte, error) {
	body, err := json.MarshalIndent(fs, "  ", "  ")
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"format\": %q,\n  \"state_sha256\": %q,\n  \"state\": ", stateFormat, hex.EncodeToString(sum[:]))
	b.Write(body)
	b.WriteString("\n}\n")
	return b.Bytes(), nil
}

// decodeState parses state.json and checks its checksum; errors say what is wrong, the caller
// names the file.
func decodeState(b []byte) (*fileState, error) {
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("not a checkpoint state file: %v", err)
	}
	if env.Format != stateFormat {
		return nil, fmt.Errorf("format %q, want %q", env.Format, stateFormat)
	}
	sum := sha256.Sum256(env.State)
	if got := hex.EncodeToString(sum[:]); got != env.SHA256 {
		return nil, fmt.Errorf("content sha256 %s, recorded %s (corrupted)", got, env.SHA256)
	}
	var fs fileState
	dec = json.NewDecoder(bytes.NewReader(env.State))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fs); err != nil {
		return nil, fmt.Errorf("bad state: %v", err)
	}
	// The caller's values come back compact, as json.Marshal writes them (the file is indented).
	compact := func(p *json.RawMessage) error {
		var b bytes.Buffer
		if err := json.Compact(&b, *p); err != nil {
			return err
		}
		*p = b.Bytes()
		return nil
	}
	for _, p := range []*json.RawMessage{&fs.Cursor, &fs.Recipe, &fs.Config, &fs.Settings} {
		if len(*p) == 0 || string(*p) == "null" {
			*p = nil
		} else if err := compact(p); err != nil {
			return nil, err
		}
	}
	for k, v := range fs.RNG {
		if err := compact(&v); err != nil {
			return nil, err
		}
		fs.RNG[k] = v
	}
	return &fs, nil
}

// metricMap is a metrics map in JSON; non-finite values, which JSON has no numbers for, are
// the strings "NaN", "Infinity" and "-Infinity" (a skipped step's loss is NaN and is worth keeping).
type metricMap map[string]float64

func (m metricMap) MarshalJSON() ([]byte, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = metricValue(v)
	}
	return json.Marshal(out)
}

func (m *metricMap) UnmarshalJSON(b []byte) error {
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = metricMap{}
	for k, v := range raw {
		f, ok := metricFloat(v)
		if !ok {
			return fmt.Errorf("metric %q: %v is not a number", k, v)
		}
		(*m)[k] = f
	}
	return nil
}

func metricValue(v float64) any {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Infinity"
	case math.IsInf(v, -1):
		return "-Infinity"
	}
	return v
}

// metricFloat reads a decoded JSON value written by metricValue.
func metricFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	case string:
		switch x {
		case "NaN":
			return math.NaN(), true
		case "Infinity":
			return math.Inf(1), true
		case "-Infinity":
			return math.Inf(-1), true
		}
	}
	return 0, false
}
