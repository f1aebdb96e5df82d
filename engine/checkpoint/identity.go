package checkpoint

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/rookscript/rookscript/engine/gpt2"
)

// Identity says which weights a run's KL reference model is. The reference is the model the
// run started from, reloaded from Source on resume and checked against Hash; only an explicit
// Sync changes it. (Taking the resumed policy as the reference made KL silently ≈ 0 in earlier
// systems; every path here either reproduces the recorded hash or fails.)
type Identity struct {
	Source string      // what gpt2.Load reloads it from: an absolute model path or a random spec
	Kind   string      // "hf", "llmc" or "random" (gpt2.Source.Kind)
	Random bool        // the source is a random initialisation
	Config gpt2.Config // its architecture
	Hash   string      // gpt2.ParamsHash of the weights Source loads to
	Syncs  []Sync      // explicit syncs, oldest first; after one, the reference is its weights
	// PolicyStart is gpt2.ParamsHash of the policy's weights when the run started, recorded
	// when the run was given no reference and those weights were not Source's (a policy
	// trained in the process before the run): Source is then only a default nobody chose, and
	// a KL to it measures the distance to weights the policy never started from. "" otherwise.
	PolicyStart string
}

// Sync records one explicit replacement of the reference's weights: a copy of the policy, or
// a mix of the two (TRL's ref_model_mixup_alpha).
type Sync struct {
	Step  int       // the training step at which it happened
	Hash  string    // gpt2.ParamsHash of the new reference weights
	Time  time.Time // when
	Alpha float64   // a mix: ref ← (1−α)·ref + α·policy, α in (0, 1); 0 for a copy (α = 1)
}

// NewReference loads the model at source (anything gpt2.Load accepts) and returns its
// identity with the weights. Loading here, rather than hashing weights the caller already
// holds, guarantees the recorded hash is what the source reproduces on resume.
func NewReference(source string) (Identity, gpt2.Config, []float32, error) {
	cfg, params, src, err := gpt2.Load(source)
	if err != nil {
		return Identity{}, gpt2.Config{}, nil, fmt.Errorf("reference model: %w", err)
	}
	path := src.Path
	if !src.Random {
		// A resumed run may start from another working directory.
		if path, err = filepath.Abs(path); err != nil {
			return Identity{}, gpt2.Config{}, nil, fmt.Errorf("reference model %s: %w", src.Path, err)
		}
	}
	return Identity{Source: path, Kind: src.Kind, Random: src.Random, Config: cfg,
		Hash: gpt2.ParamsHash(cfg, params)}, cfg, params, nil
}

// Synced reports whether the reference was explicitly replaced since the run started.
func (id Identity) Synced() bool { return len(id.Syncs) > 0 }

// Current is the hash of the reference's present weights: the last sync's, or the source's.
func (id Identity) Current() string {
	if n := len(id.Syncs); n > 0 {
		return id.Syncs[n-1].Hash
	}
	return id.Hash
}

// Sync records that the reference's weights become params (normally a copy of the policy) at
// step, and returns their hash. The caller replaces the reference model's weights and passes
// params as State.ReferenceParams to every later Save.
func (id *Identity) Sync(step int, params []float32) (string, error) { return id.Mix(step, 1, params) }

// Mix records that the reference's weights become params, the mix (1−alpha)·ref + alpha·policy
// made at step (alpha 1: a copy of the policy), and returns their hash.
func (id *Identity) Mix(step int, alpha float64, params []float32) (string, error) {
	if !(alpha > 0 && alpha <= 1) {
		return "", fmt.Errorf("reference mix at step %d: alpha %g is outside (0, 1]", step, alpha)
	}
	if alpha == 1 {
		alpha = 0 // a copy, recorded as before mixes existed
	}
	if n := gpt2.NewLayout(id.Config).Total; len(params) != n {
		return "", fmt.Errorf("reference sync at step %d: %d parameters, the reference has %d", step, len(params), n)
	}
	if n := len(id.Syncs); n > 0 && step < id.Syncs[n-1].Step {
		return "", fmt.Errorf("reference sync at step %d: the last sync was at step %d", step, id.Syncs[n-1].Step)
	}
	h := gpt2.ParamsHash(id.Config, params)
	id.Syncs = append(id.Syncs, Sync{Step: step, Hash: h, Time: time.Now().UTC(), Alpha: alpha})
	return h, nil
}

// validate reports an identity that cannot be reloaded.
func (id Identity) validate() error {
	if id.Source == "" || id.Hash == "" {
		return fmt.Errorf("reference identity has no source or hash: record the model the run started from (NewReference), even when beta is 0, so a resumed run never takes the resumed policy as its reference")
	}
	if err := id.Config.Validate(); err != nil {
		return fmt.Errorf("reference %s: %w", id.Source, err)
	}
	for i := 1; i < len(id.Syncs); i++ {
		if id.Syncs[i].Step < id.Syncs[i-1].Step {
			return fmt.Errorf("reference %s: syncs out of order (step %d after step %d)", id.Source, id.Syncs[i].Step, id.Syncs[i-1].Step)
		}
	}
	return nil
}

// LoadReference reloads the reference from its recorded source and checks its content hash.
// A reference that was synced is not at its source any more: load it with State.LoadReference,
// which takes it from the checkpoint.
func LoadReference(id Identity) (gpt2.Config, []float32, error) {
	if err := id.validate(); err != nil {
		return gpt2.Config{}, nil, err
	}
	if id.Synced() {
		last := id.Syncs[len(id.Syncs)-1]
		return gpt2.Config{}, nil, fmt.Errorf("reference was synced at step %d (hash %s): its weights are in the checkpoint, not at %s; use State.LoadReference",
			last.Step, last.Hash, id.Source)
	}
	cfg, params, _, err := gpt2.Load(id.Source)
	if err != nil {
		return gpt2.Config{}, nil, fmt.Errorf("reloading the reference model from its recorded source: %w", err)
	}
	if cfg != id.Config {
		return gpt2.Config{}, nil, fmt.Errorf("reference model %s: architecture %+v, the run recorded %+v", id.Source, cfg, id.Config)
	}
	if h := gpt2.ParamsHash(cfg, params); h != id.Hash {
		return gpt2.Config{}, nil, fmt.Errorf("reference model %s: content hash %s, the run recorded %s: its weights changed since the run started; refusing to use them as the KL reference",
			id.Source, h, id.Hash)
	}
	return cfg, params, nil
}
