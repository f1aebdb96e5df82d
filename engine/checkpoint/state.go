package checkpoint

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/optim"
)

// State is everything a run needs to continue exactly where it was: what Save writes and
// Load returns. The JSON fields are opaque to this package: the caller (the Lua binding, a
// test) encodes its own values, so uint64 seeds and nested tables survive exactly.
type State struct {
	Step int // training steps completed

	Model     gpt2.Config // the policy's architecture
	Params    []float32   // the policy's weights, Layout order
	Optimizer OptimizerState

	RNG    map[string]json.RawMessage // every random state the run depends on, by name (SetRNG)
	Cursor json.RawMessage            // where the data stream is
	Recipe json.RawMessage            // the recipe's own state table
	Config json.RawMessage            // the resolved config; Save uses Run.WriteConfig's when nil
	// Kernels names what computed the run's sums (the binding's description of its backend:
	// the CPU kernels' vector width and OpenBLAS's kernel family, or the GPU). A run continues
	// bit for bit only on the same kernels, so a resume on others says so. Empty in
	// checkpoints written before it was recorded.
	Kernels string

	Reference       Identity  // the KL reference; required, even when beta is 0
	ReferenceParams []float32 // the reference's weights: required after a sync, checked if given before

	// Metrics of this step; Options.BestMetric is read from here. Non-finite values are kept.
	Metrics map[string]float64

	// MetricsBytes is the size of metrics.jsonl when the checkpoint was saved: what was logged
	// up to it (RewindMetrics). Set by Save and Load; -1 when unknown.
	MetricsBytes int64

	// Set by Save and Load.
	Name       string    // "step-00000050"
	Time       time.Time // when it was saved
	ParamsHash string    // gpt2.ParamsHash of Params
}

// OptimizerState is AdamW's configuration, step count and moments.
type OptimizerState struct {
	Config optim.AdamWConfig
	// Base is the configuration the recipe built the optimizer with, before the run changed
	// it (a recovery policy lowering the learning rate): on resume, a setting the recipe now
	// builds differently from Base is one the user changed. Zero when not recorded.
	Base  optim.AdamWConfig
	Steps int
	M, V  []float32 // Layout order
}

// NewState captures the policy's weights and the optimizer's state at step (host copies).
// The caller adds the reference, RNG states, cursor and recipe state before saving.
func NewState(step int, policy *gpt2.Model, opt *optim.AdamW) *State {
	m, v := opt.Export()
	return &State{Step: step, Model: policy.Config, Params: policy.ParamsHost(),
		Optimizer: OptimizerState{Config: opt.Config, Steps: opt.Steps, M: m, V: v}, MetricsBytes: -1}
}

// Apply puts the saved weights and optimizer state into policy and opt, for a resume into
// freshly built objects or a rollback of live ones. opt keeps its own Config.
func (s *State) Apply(policy *gpt2.Model, opt *optim.AdamW) error {
	if policy.Config != s.Model {
		return fmt.Errorf("checkpoint %s: policy architecture %+v, the checkpoint holds %+v", s.Name, policy.Config, s.Model)
	}
	if err := opt.Restore(s.Optimizer.M, s.Optimizer.V, s.Optimizer.Steps); err != nil {
		return fmt.Errorf("checkpoint %s: %w", s.Name, err)
	}
	return policy.SetParams(s.Params)
}

// SetRNG stores v (any JSON-encodable value: a uint64 seed, MarshalBinary bytes, ...) as the
// random state called name.
func (s *State) SetRNG(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("rng state %q: %w", name, err)
	}
	if s.RNG == nil {
		s.RNG = map[string]json.RawMessage{}
	}
	s.RNG[name] = b
	return nil
}

// GetRNG decodes the random state called name into v. A missing state is an error: a resumed
// run must not silently start a fresh stream.
func (s *State) GetRNG(name string, v any) error {
	b, ok := s.RNG[name]
	if !ok {
		return fmt.Errorf("checkpoint %s has no rng state %q", s.Name, name)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("checkpoint %s: rng state %q: %w", s.Name, name, err)
	}
	return nil
}

// LoadReference returns the reference's weights: the synced ones stored in the checkpoint,
// or the model reloaded from the recorded source, its hash checked either way.
func (s *State) LoadReference() (gpt2.Config, []float32, error) {
	if !s.Reference.Synced() {
		return LoadReference(s.Reference)
	}
	if s.ReferenceParams == nil {
		return gpt2.Config{}, nil, fmt.Errorf("checkpoint %s: the reference was synced but its weights are not in the state", s.Name)
	}
	if h := gpt2.ParamsHash(s.Reference.Config, s.ReferenceParams); h != s.Reference.Current() {
		return gpt2.Config{}, nil, fmt.Errorf("checkpoint %s: synced reference has content hash %s, its sync recorded %s", s.Name, h, s.Reference.Current())
	}
	return s.Reference.Config, s.ReferenceParams, nil
}

// validate reports a state Save must refuse, before anything is written. It returns the
// policy's hash and the reference's when ReferenceParams is given (hashing is the slow part).
func (s *State) validate() (policyHash string, err error) {
	if s.Step < 0 {
		return "", fmt.Errorf("negative step %d", s.Step)
	}
	if err := s.Model.Validate(); err != nil {
		return "", fmt.Errorf("policy: %w", err)
	}
	l := gpt2.NewLayout(s.Model)
	if len(s.Params) != l.Total {
		return "", fmt.Errorf("policy: %d parameters, the architecture needs %d", len(s.Params), l.Total)
	}
	if err := s.Optimizer.Config.Validate(); err != nil {
		return "", fmt.Errorf("optimizer: %w", err)
	}
	if len(s.Optimizer.M) != l.Total || len(s.Optimizer.V) != l.Total {
		return "", fmt.Errorf("optimizer: moments of %d and %d values, the policy has %d parameters", len(s.Optimizer.M), len(s.Optimizer.V), l.Total)
	}
	if s.Optimizer.Steps < 0 {
		return "", fmt.Errorf("optimizer: negative step count %d", s.Optimizer.Steps)
	}
	// A non-finite value saved would become LATEST and the target of every rollback.
	for _, c := range []struct {
		what string
		v    []float32
	}{{"policy weights", s.Params}, {"optimizer m", s.Optimizer.M}, {"optimizer v", s.Optimizer.V}} {
		if err := checkFinite(l, c.what, c.v); err != nil {
			return "", err
		}
	}
	ref := s.Reference
	if err := ref.validate(); err != nil {
		return "", err
	}
	if n := len(ref.Syncs); n > 0 && ref.Syncs[n-1].Step > s.Step {
		return "", fmt.Errorf("reference: synced at step %d, after the state's step %d", ref.Syncs[n-1].Step, s.Step)
	}
	switch {
	case ref.Synced() && s.ReferenceParams == nil:
		return "", fmt.Errorf("reference was synced at step %d but ReferenceParams is not set: its weights must be saved", ref.Syncs[len(ref.Syncs)-1].Step)
	case s.ReferenceParams != nil:
		rl := gpt2.NewLayout(ref.Config)
		if len(s.ReferenceParams) != rl.Total {
			return "", fmt.Errorf("reference: %d parameters, its architecture needs %d", len(s.ReferenceParams), rl.Total)
		}
		if err := checkFinite(rl, "reference weights", s.ReferenceParams); err != nil {
			return "", err
		}
		// The reference in memory must be the one recorded: a change without Sync is the bug
		// this package exists to catch.
		if h := gpt2.ParamsHash(ref.Config, s.ReferenceParams); h != ref.Current() {
			return "", fmt.Errorf("reference weights have content hash %s but the identity records %s (source %s): the reference changed without an explicit sync",
				h, ref.Current(), ref.Source)
		}
	}
	for name, v := range s.RNG {
		if !json.Valid(v) {
			return "", fmt.Errorf("rng state %q is not valid JSON", name)
		}
	}
	for _, f := range []struct {
		name string
		v    json.RawMessage
	}{{"cursor", s.Cursor}, {"recipe state", s.Recipe}, {"config", s.Config}} {
		if f.v != nil && !json.Valid(f.v) {
			return "", fmt.Errorf("%s is not valid JSON", f.name)
		}
	}
	return gpt2.ParamsHash(s.Model, s.Params), nil
}

// checkFinite names the first non-finite value of v by tensor and index.
func checkFinite(l *gpt2.Layout, what string, v []float32) error {
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			for _, t := range l.Tensors {
				if i >= t.Off && i < t.Off+t.Size {
					return fmt.Errorf("%s: %s[%d] is %g; refusing to save a non-finite checkpoint", what, t.Name, i-t.Off, x)
				}
			}
			return fmt.Errorf("%s: element %d is %g; refusing to save a non-finite checkpoint", what, i, x)
		}
	}
	return nil
}
