package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/safetensors"
)

// load reads the checkpoint in dir, trusting nothing until it is verified: state.json against
// its own checksum, then every file against the manifest (size, sha256), then shapes, the
// architecture and content hashes of what the files hold.
func load(dir string) (*State, error) {
	name := filepath.Base(dir)
	fail := func(format string, a ...any) (*State, error) {
		return nil, fmt.Errorf("checkpoint %s: %s", dir, fmt.Sprintf(format, a...))
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fail("no such checkpoint directory")
	}
	fs, err := readStateFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	if stepName(fs.Step) != name {
		return fail("state.json holds step %d, the directory is named %s", fs.Step, name)
	}
	cfg := fs.Model.config()
	if err := cfg.Validate(); err != nil {
		return fail("state.json: policy architecture: %v", err)
	}
	id := fs.Reference.identity()
	if err := id.validate(); err != nil {
		return fail("state.json: %v", err)
	}
	if fs.Optimizer.Kind != "adamw" {
		return fail("state.json: optimizer kind %q, want adamw", fs.Optimizer.Kind)
	}
	optCfg := fs.Optimizer.config()
	if err := optCfg.Validate(); err != nil {
		return fail("state.json: %v", err)
	}

	want := checkpointFiles(id.Synced())
	for _, f := range want {
		if _, ok := fs.Files[f]; !ok {
			return fail("state.json: the manifest does not list %s", f)
		}
	}
	for f := range fs.Files {
		if !slices.Contains(want, f) {
			return fail("state.json: the manifest lists an unexpected file %s", f)
		}
	}
	var optBytes []byte
	for _, f := range want {
		path := filepath.Join(dir, filepath.FromSlash(f))
		b, err := verifyFile(path, fs.Files[f], f == "optimizer.safetensors")
		if err != nil {
			return fail("%s: %v", f, err)
		}
		if b != nil {
			optBytes = b
		}
	}

	mcfg, params, err := gpt2.LoadHF(filepath.Join(dir, "model"))
	if err != nil {
		return fail("%v", err)
	}
	if mcfg != cfg {
		return fail("model/config.json: architecture %+v, state.json records %+v", mcfg, cfg)
	}
	if h := gpt2.ParamsHash(cfg, params); h != fs.ParamsHash {
		return fail("model/model.safetensors: policy content hash %s, state.json records %s", h, fs.ParamsHash)
	}
	total := len(params)
	m, v, steps, err := parseOptimizer(filepath.Join(dir, "optimizer.safetensors"), optBytes, total)
	if err != nil {
		return fail("optimizer.safetensors: %v", err)
	}
	if steps != fs.Optimizer.Steps {
		return fail("optimizer.safetensors: steps %d, state.json records %d", steps, fs.Optimizer.Steps)
	}
	var refParams []float32
	if id.Synced() {
		rcfg, rp, err := gpt2.LoadHF(filepath.Join(dir, "reference"))
		if err != nil {
			return fail("%v", err)
		}
		if rcfg != id.Config {
			return fail("reference/config.json: architecture %+v, state.json records %+v", rcfg, id.Config)
		}
		if h := gpt2.ParamsHash(rcfg, rp); h != id.Current() {
			return fail("reference/model.safetensors: content hash %s, the last sync recorded %s", h, id.Current())
		}
		refParams = rp
	}
	metricsBytes := int64(-1)
	if fs.MetricsBytes != nil {
		metricsBytes = *fs.MetricsBytes
	}
	return &State{Step: fs.Step, Model: cfg, Params: params, MetricsBytes: metricsBytes,
		Optimizer: OptimizerState{Config: optCfg, Base: fs.Optimizer.base(), Steps: steps, M: m, V: v},
		RNG:       fs.RNG, Cursor: fs.Cursor, Recipe: fs.Recipe, Config: fs.Config, Kernels: fs.Kernels,
		Reference: id, ReferenceParams: refParams, Metrics: map[string]float64(fs.Metrics),
		Name: name, Time: fs.Time, ParamsHash: fs.ParamsHash}, nil
}

// verifyFile checks a file's size and sha256 against its manifest entry; with keep it returns
// the bytes it hashed, so they are parsed without a second read.
func verifyFile(path string, e fileEntry, keep bool) ([]byte, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errors.New("missing")
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode())
	}
	if fi.Size() != e.Size {
		return nil, fmt.Errorf("%d bytes, expected %d (truncated or overwritten)", fi.Size(), e.Size)
	}
	var got string
	var b []byte
	if keep {
		if b, err = os.ReadFile(path); err != nil {
			return nil, err
		}
		if int64(len(b)) != e.Size {
			return nil, fmt.Errorf("%d bytes, expected %d (changed while reading)", len(b), e.Size)
		}
		sum := sha256.Sum256(b)
		got = hex.EncodeToString(sum[:])
	} else {
		fe, err := hashFile(path)
		if err != nil {
			return nil, err
		}
		got = fe.SHA256
	}
	if got != e.SHA256 {
		return nil, fmt.Errorf("sha256 %s, expected %s (corrupted)", got, e.SHA256)
	}
	return b, nil
}

// parseOptimizer reads AdamW's moments (flat, total floats each) and step count.
func parseOptimizer(path string, b []byte, total int) (m, v []float32, steps int, err error) {
	st, err := safetensors.Parse(path, b)
	if err != nil {
		return nil, nil, 0, err
	}
	if names := st.Names(); !slices.Equal(names, []string{"m", "steps", "v"}) {
		return nil, nil, 0, fmt.Errorf("tensors %v, want m, steps and v", names)
	}
	moment := func(name string) ([]float32, error) {
		t := st.Tensors[name]
		if t.DType != "F32" || !slices.Equal(t.Shape, []int{total}) {
			return nil, fmt.Errorf("tensor %q is %s %v, want F32 [%d] (the policy's parameter count)", name, t.DType, t.Shape, total)
		}
		return t.Float32s()
	}
	if m, err = moment("m"); err != nil {
		return nil, nil, 0, err
	}
	if v, err = moment("v"); err != nil {
		return nil, nil, 0, err
	}
	t := st.Tensors["steps"]
	if t.DType != "I64" || len(t.Shape) != 0 {
		return nil, nil, 0, fmt.Errorf("tensor \"steps\" is %s %v, want an I64 scalar", t.DType, t.Shape)
	}
	s, err := t.Ints()
	if err != nil {
		return nil, nil, 0, err
	}
	if s[0] < 0 {
		return nil, nil, 0, fmt.Errorf("negative steps %d", s[0])
	}
	return m, v, s[0], nil
}
