package checkpoint

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
)

var tinyConfig = gpt2test.Tiny()

const stopToken = gpt2test.Stop

// One backend for the whole test binary: each cpu.New starts its own worker pool.
var testBackend = sync.OnceValue(func() backend.Backend { return cpu.New(2) })

func bitsEqual(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeModel saves random weights of cfg as an HF directory and returns its path.
func writeModel(t testing.TB, cfg gpt2.Config, seed uint64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ref-model")
	if err := gpt2.SaveHF(dir, cfg, gpt2.RandomParams(cfg, seed)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// plainState is a valid state without training: random weights, made-up moments.
func plainState(t testing.TB, step int, id Identity, metrics map[string]float64) *State {
	t.Helper()
	p := gpt2.RandomParams(id.Config, uint64(step)+100)
	m, v := make([]float32, len(p)), make([]float32, len(p))
	for i := range p {
		m[i], v[i] = p[i]*0.1, p[i]*p[i]
	}
	st := &State{Step: step, Model: id.Config, Params: p, Reference: id, Metrics: metrics,
		Optimizer: OptimizerState{Config: optim.DefaultAdamW(), Steps: step, M: m, V: v}}
	if err := st.SetRNG("seed", uint64(step)*7); err != nil {
		t.Fatal(err)
	}
	st.Cursor = mustJSON(t, step)
	return st
}

func wantErr(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not mention %q", err, p)
		}
	}
}

func mustSave(t testing.TB, r *Run, st *State) string {
	t.Helper()
	name, err := r.Save(st)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// The toy training task for the resume tests: prompts from a list (the data cursor) plus one
// drawn by a stateful RNG, reward = fraction of completion tokens divisible by 3.
var toyPrompts = [][]int32{{1, 2, 3}, {4, 5}, {6, 7, 8, 9}, {10}, {11, 12, 13}, {14, 15}, {16, 17, 18}, {19, 20, 21, 22}, {23, 24}, {25, 26, 27}}

// recipeState stands for the recipe's own table; LRScale feeds back into training, so a
// resume that lost it would diverge.
type recipeState struct {
	Phase      string    `json:"phase"`
	BestReward float64   `json:"best_reward"`
	LRScale    float64   `json:"lr_scale"`
	History    []float64 `json:"history"`
	Flags      struct {
		Synced bool `json:"synced"`
	} `json:"flags"`
}

// harness is a GRPO training loop with everything a resume must restore.
type harness struct {
	t       testing.TB
	policy  *gpt2.Model
	ref     *gpt2.Model
	opt     *optim.AdamW
	tr      *grpo.Trainer
	sampler *rollout.Sampler
	refID   Identity

	baseSeed uint64    // per-step rollout seeds derive from it
	data     *rand.PCG // draws one prompt per step
	cursor   int       // index into toyPrompts
	step     int       // steps completed
	recipe   recipeState
	syncAt   int // completed steps at which the reference is synced to the policy; -1: never
	nanAt    int // step whose gradient gets a NaN (1-based); 0: never
	last     grpo.Metrics
}

func newHarness(t testing.TB, refDir string, syncAt int) *harness {
	t.Helper()
	id, cfg, params, err := NewReference(refDir)
	if err != nil {
		t.Fatal(err)
	}
	policy, err := gpt2.New(testBackend(), cfg, params)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := optim.NewAdamW(policy, optim.AdamWConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, policy: policy, opt: opt, refID: id, baseSeed: 0xdeadbeefcafef00d,
		data: rand.NewPCG(3, 4), syncAt: syncAt, recipe: recipeState{Phase: "warmup", BestReward: -1, LRScale: 1}}
	h.wire(cfg, params)
	return h
}

// wire builds the reference model, trainer and sampler around h.policy and h.opt.
func (h *harness) wire(refCfg gpt2.Config, refParams []float32) {
	ref, err := gpt2.New(testBackend(), refCfg, refParams)
	if err != nil {
		h.t.Fatal(err)
	}
	h.ref = ref
	h.tr = &grpo.Trainer{Policy: h.policy, Ref: ref, Opt: h.opt}
	h.tr.Hooks.AfterBackward = func(p *gpt2.Model) {
		if h.step == h.nanAt {
			p.B.Fill(p.Grads.Slice(7, 1), float32(math.NaN()))
		}
	}
	h.sampler = rollout.NewSampler(h.policy)
}

// trainStep runs one rollout + GRPO step and returns its deterministic metrics.
func (h *harness) trainStep() grpo.Metrics {
	t := h.t
	t.Helper()
	if h.step == h.syncAt {
		params := h.policy.ParamsHost()
		if _, err := h.refID.Sync(h.step, params); err != nil {
			t.Fatal(err)
		}
		if err := h.ref.SetParams(params); err != nil {
			t.Fatal(err)
		}
		h.recipe.Flags.Synced = true
	}
	h.step++
	n := len(toyPrompts)
	prompts := [][]int32{toyPrompts[h.cursor%n], toyPrompts[(h.cursor+1)%n], toyPrompts[rand.New(h.data).IntN(n)]}
	h.cursor += 2
	b, err := h.sampler.Generate(context.Background(), prompts, rollout.Config{Group: 4, MaxNewTokens: 8,
		Temperature: 1, Seed: h.baseSeed + uint64(h.step)*0x9e3779b97f4a7c15, StopToken: stopToken})
	if err != nil {
		t.Fatal(err)
	}
	b.Rewards = make([]float64, len(b.Completions))
	for i, c := range b.Completions {
		for _, tok := range c.Tokens {
			if tok%3 == 0 {
				b.Rewards[i] += 1 / float64(len(c.Tokens))
			}
		}
	}
	cfg := grpo.DefaultConfig()
	cfg.Beta, cfg.Minibatches = 0.1, 2
	h.opt.Config.LR = 3e-3 * h.recipe.LRScale
	m, err := h.tr.Step(context.Background(), b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for k := range m {
		if strings.HasPrefix(k, "time/") || k == "tokens_per_sec" {
			delete(m, k) // wall-clock, not computation
		}
	}
	// A toy recovery policy: a step worse than the best so far lowers the learning rate.
	if r := m["reward"]; r < h.recipe.BestReward {
		h.recipe.LRScale *= 0.9
	} else {
		h.recipe.BestReward = r
	}
	h.recipe.History = append(h.recipe.History, m["reward"])
	if h.step >= 3 {
		h.recipe.Phase = "main"
	}
	h.last = m
	return m
}

// state captures everything of h for a checkpoint.
func (h *harness) state() *State {
	t := h.t
	t.Helper()
	st := NewState(h.step, h.policy, h.opt)
	st.Reference = h.refID
	st.Reference.Syncs = slices.Clone(h.refID.Syncs)
	if h.refID.Synced() {
		st.ReferenceParams = h.ref.ParamsHost()
	}
	pcg, err := h.data.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetRNG("rollout", h.baseSeed); err != nil {
		t.Fatal(err)
	}
	if err := st.SetRNG("data", pcg); err != nil {
		t.Fatal(err)
	}
	st.Cursor = mustJSON(t, h.cursor)
	st.Recipe = mustJSON(t, h.recipe)
	st.Metrics = h.last
	return st
}

// resume rebuilds a harness from scratch out of a loaded state.
func resume(t testing.TB, st *State, syncAt int) *harness {
	t.Helper()
	policy, err := gpt2.New(testBackend(), st.Model, st.Params)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := optim.NewAdamW(policy, st.Optimizer.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(policy, opt); err != nil {
		t.Fatal(err)
	}
	refCfg, refParams, err := st.LoadReference()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, policy: policy, opt: opt, refID: st.Reference, step: st.Step, syncAt: syncAt, data: new(rand.PCG)}
	var pcg []byte
	if err := st.GetRNG("rollout", &h.baseSeed); err != nil {
		t.Fatal(err)
	}
	if err := st.GetRNG("data", &pcg); err != nil {
		t.Fatal(err)
	}
	if err := h.data.UnmarshalBinary(pcg); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(st.Cursor, &h.cursor); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(st.Recipe, &h.recipe); err != nil {
		t.Fatal(err)
	}
	h.wire(refCfg, refParams)
	return h
}

// sameMetrics compares two metric maps bit for bit.
func sameMetrics(a, b grpo.Metrics) (string, bool) {
	if len(a) != len(b) {
		return "different metric names", false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || math.Float64bits(v) != math.Float64bits(w) {
			return k, false
		}
	}
	return "", true
}

// rewriteState edits a checkpoint's state.json and re-seals it (checksum, manifest hashes of
// the files now on disk), to build checkpoints that are consistent but wrong.
func rewriteState(t testing.TB, ckDir string, edit func(fs *fileState)) {
	t.Helper()
	path := filepath.Join(ckDir, "state.json")
	fs, err := readStateFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for f := range fs.Files {
		if e, err := hashFile(filepath.Join(ckDir, filepath.FromSlash(f))); err == nil {
			fs.Files[f] = e
		}
	}
	if edit != nil {
		edit(fs)
	}
	b, err := encodeState(fs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
