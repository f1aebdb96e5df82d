package checkpoint

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/rookscript/rookscript/engine/gpt2"
)

// TestResumeIsExact is DESIGN §6.7 and issue 6 item 4(a): N steps + save + resume into fresh
// objects + M steps gives bit-identical weights, optimizer state and metrics (KL included) to
// N+M continuous steps, with the reference reloaded from its HF source or, after a sync,
// from the checkpoint.
func TestResumeIsExact(t *testing.T) {
	const n, m = 3, 3
	for _, c := range []struct {
		name   string
		syncAt int
	}{{"reference from source", -1}, {"reference synced at step 2", 2}} {
		t.Run(c.name, func(t *testing.T) {
			refDir := writeModel(t, tinyConfig, 5)

			cont := newHarness(t, refDir, c.syncAt)
			var want []map[string]float64
			for i := range n + m {
				met := cont.trainStep()
				if i >= n {
					want = append(want, met)
				}
			}

			run, err := Create(filepath.Join(t.TempDir(), "run"), Options{KeepLast: DefaultKeepLast})
			if err != nil {
				t.Fatal(err)
			}
			first := newHarness(t, refDir, c.syncAt)
			for range n {
				met := first.trainStep()
				if err := run.AppendMetrics(first.step, met); err != nil {
					t.Fatal(err)
				}
			}
			mustSave(t, run, first.state())
			stepN := first.policy.ParamsHost()
			first = nil // nothing of the first run's objects survives
			run.Close()

			run, err = Open(run.Dir)
			if err != nil {
				t.Fatal(err)
			}
			st, err := run.Latest()
			if err != nil {
				t.Fatal(err)
			}
			if st.Step != n || !bitsEqual(st.Params, stepN) {
				t.Fatalf("loaded step %d, weights equal: %v", st.Step, bitsEqual(st.Params, stepN))
			}
			if (c.syncAt >= 0) != (st.ReferenceParams != nil) {
				t.Fatalf("synced %v but the checkpoint has reference weights: %v", c.syncAt >= 0, st.ReferenceParams != nil)
			}
			res := resume(t, st, c.syncAt)
			for i := range m {
				got := res.trainStep()
				if k, ok := sameMetrics(got, want[i]); !ok {
					t.Fatalf("step %d after resume: metric %q = %v, continuous run %v", n+i+1, k, got[k], want[i][k])
				}
				if got["kl"] <= 0 || got["updates"] != 2 {
					t.Fatalf("step %d: kl %g, updates %g: the KL term must be live for this test to mean anything", n+i+1, got["kl"], got["updates"])
				}
				if err := run.AppendMetrics(res.step, got); err != nil {
					t.Fatal(err)
				}
			}
			if !bitsEqual(res.policy.ParamsHost(), cont.policy.ParamsHost()) {
				t.Fatal("weights after resume differ from the continuous run")
			}
			rm, rv := res.opt.Export()
			cm, cv := cont.opt.Export()
			if !bitsEqual(rm, cm) || !bitsEqual(rv, cv) || res.opt.Steps != cont.opt.Steps {
				t.Fatal("optimizer state after resume differs from the continuous run")
			}
			if res.cursor != cont.cursor || res.recipe.LRScale != cont.recipe.LRScale || len(res.recipe.History) != n+m {
				t.Fatalf("cursor %d/%d, recipe %+v / %+v", res.cursor, cont.cursor, res.recipe, cont.recipe)
			}

			// The log holds all N+M steps, numbers exact through JSON.
			recs, skipped, err := run.ReadMetrics()
			if err != nil || len(skipped) > 0 || len(recs) != n+m {
				t.Fatalf("ReadMetrics: %d records, skipped %v, %v", len(recs), skipped, err)
			}
			for i, w := range want {
				rec := recs[n+i]
				if rec["step"] != n+i+1 || rec["kl"] != w["kl"] || rec["loss"] != w["loss"] {
					t.Fatalf("metrics.jsonl record %d = %v, want kl %v loss %v", n+i, rec, w["kl"], w["loss"])
				}
			}
		})
	}
}

// TestResumeWithPolicyAsReferenceDiverges is the original failure, reproduced to show the
// resume test detects it: taking the resumed policy as the reference changes the KL values.
func TestResumeWithPolicyAsReferenceDiverges(t *testing.T) {
	refDir := writeModel(t, tinyConfig, 5)
	cont := newHarness(t, refDir, -1)
	for range 3 {
		cont.trainStep()
	}
	st := cont.state()
	st.Name = "in-memory"
	want := cont.trainStep()

	bad := resume(t, st, -1)
	if err := bad.ref.SetParams(st.Params); err != nil { // the bug: reference := resumed policy
		t.Fatal(err)
	}
	got := bad.trainStep()
	if got["kl"] == want["kl"] {
		t.Fatalf("KL %g is the same with the wrong reference: the exactness test could not catch the bug", got["kl"])
	}
}

// TestReferenceIdentity is issue 6 item 4(b): after resume the reference has the original
// content hash, never the resumed policy's; a reference changed on disk, a missing one, a
// reference changed in memory without a sync, and a state without a reference are errors.
func TestReferenceIdentity(t *testing.T) {
	refDir := writeModel(t, tinyConfig, 5)
	run, err := Create(filepath.Join(t.TempDir(), "run"), Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, refDir, -1)
	original := h.refID.Hash
	for range 3 {
		h.trainStep()
	}
	mustSave(t, run, h.state())

	st, err := run.Latest()
	if err != nil {
		t.Fatal(err)
	}
	cfg, params, err := st.LoadReference()
	if err != nil {
		t.Fatal(err)
	}
	got := gpt2.ParamsHash(cfg, params)
	if got != original || st.Reference.Hash != original {
		t.Fatalf("reference hash after resume %s (recorded %s), the original is %s", got, st.Reference.Hash, original)
	}
	if st.ParamsHash == original || got == gpt2.ParamsHash(st.Model, st.Params) {
		t.Fatal("the resumed policy has the reference's hash: training did not move it, so the test proves nothing")
	}
	if abs, _ := filepath.Abs(refDir); st.Reference.Source != abs || st.Reference.Kind != "hf" {
		t.Fatalf("recorded source %q kind %q, want %q hf", st.Reference.Source, st.Reference.Kind, abs)
	}

	// Save refuses a reference that changed without a sync, and a state without a reference.
	bad := h.state()
	bad.ReferenceParams = h.policy.ParamsHost()
	_, err = run.Save(bad)
	wantErr(t, err, "without an explicit sync", original)
	bad = h.state()
	bad.Reference = Identity{}
	_, err = run.Save(bad)
	wantErr(t, err, "reference identity has no source")

	// A changed file at the source: both hashes and the source are named.
	changed := gpt2.RandomParams(tinyConfig, 6)
	if err := gpt2.SaveHF(refDir, tinyConfig, changed); err != nil {
		t.Fatal(err)
	}
	_, _, err = st.LoadReference()
	wantErr(t, err, original, gpt2.ParamsHash(tinyConfig, changed), st.Reference.Source, "refusing")

	// A missing source is an error, never a random substitute.
	if err := os.RemoveAll(refDir); err != nil {
		t.Fatal(err)
	}
	_, _, err = st.LoadReference()
	wantErr(t, err, "model not found", st.Reference.Source)

	// A synced reference can only come from the checkpoint.
	synced := st.Reference
	if _, err := synced.Sync(3, st.Params); err != nil {
		t.Fatal(err)
	}
	_, _, err = LoadReference(synced)
	wantErr(t, err, "synced at step 3")
}

// TestSyncedReferenceChangedInCheckpoint: reference weights in a checkpoint that no longer
// match the recorded sync (manifest re-sealed, so only the content hash can tell) are refused.
func TestSyncedReferenceChangedInCheckpoint(t *testing.T) {
	refDir := writeModel(t, tinyConfig, 5)
	run, err := Create(filepath.Join(t.TempDir(), "run"), Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, refDir, 1)
	for range 2 {
		h.trainStep()
	}
	name := mustSave(t, run, h.state())
	st, err := run.Load(name)
	if err != nil {
		t.Fatal(err)
	}
	if st.Reference.Current() == st.Reference.Hash || len(st.Reference.Syncs) != 1 || st.Reference.Syncs[0].Step != 1 {
		t.Fatalf("sync history %+v", st.Reference.Syncs)
	}
	ck := filepath.Join(run.Dir, "checkpoints", name)
	other := gpt2.RandomParams(tinyConfig, 9)
	if err := gpt2.SaveHF(filepath.Join(ck, "reference"), tinyConfig, other); err != nil {
		t.Fatal(err)
	}
	rewriteState(t, ck, nil)
	_, err = run.Load(name)
	wantErr(t, err, "reference/model.safetensors", gpt2.ParamsHash(tinyConfig, other), st.Reference.Current())
}

// TestStateRoundTrip: everything a state carries comes back as it went in.
func TestStateRoundTrip(t *testing.T) {
	id, _, _, err := NewReference("random:tiny@seed=3")
	if err != nil {
		t.Fatal(err)
	}
	id.Config = tinyConfig // a small architecture; the hash is what is checked
	id.Hash = gpt2.ParamsHash(tinyConfig, gpt2.RandomParams(tinyConfig, 1))
	run, err := Create(filepath.Join(t.TempDir(), "run"), Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.WriteConfig(map[string]any{"steps": 200, "kl_coef": 0.005}); err != nil {
		t.Fatal(err)
	}
	if err := run.WriteRecipe([]byte("-- recipe\n")); err != nil {
		t.Fatal(err)
	}
	st := plainState(t, 12, id, map[string]float64{"reward": 0.25, "loss": math.NaN(), "kl": math.Inf(1)})
	if err := st.SetRNG("big", uint64(math.MaxUint64)); err != nil {
		t.Fatal(err)
	}
	st.Recipe = json.RawMessage(`{"a":[1,2.5,"x",true,{"b":null}],"n":1e-300}`)
	st.Kernels = "cpu: AVX2 kernels, OpenBLAS Haswell"
	id.PolicyStart = "feed"
	st.Reference = id
	mustSave(t, run, st)
	got, err := run.Latest()
	if err != nil {
		t.Fatal(err)
	}
	var big, seed uint64
	if err := got.GetRNG("big", &big); err != nil || big != math.MaxUint64 {
		t.Fatalf("rng big = %d, %v", big, err)
	}
	if err := got.GetRNG("seed", &seed); err != nil || seed != 84 {
		t.Fatalf("rng seed = %d, %v", seed, err)
	}
	wantErr(t, got.GetRNG("absent", &seed), "no rng state \"absent\"")
	if string(got.Recipe) != string(st.Recipe) {
		t.Fatalf("recipe state %s, want %s", got.Recipe, st.Recipe)
	}
	if got.Kernels != st.Kernels {
		t.Fatalf("kernels %q, want %q", got.Kernels, st.Kernels)
	}
	if string(got.Config) != `{"kl_coef":0.005,"steps":200}` || string(got.Cursor) != "12" {
		t.Fatalf("config %s cursor %s", got.Config, got.Cursor)
	}
	if !math.IsNaN(got.Metrics["loss"]) || !math.IsInf(got.Metrics["kl"], 1) || got.Metrics["reward"] != 0.25 {
		t.Fatalf("metrics %v", got.Metrics)
	}
	if !bitsEqual(got.Optimizer.M, st.Optimizer.M) || !bitsEqual(got.Optimizer.V, st.Optimizer.V) || got.Optimizer.Steps != 12 ||
		got.Optimizer.Config != st.Optimizer.Config {
		t.Fatal("optimizer state differs")
	}
	if got.Reference.Source != "random:tiny@seed=3" || !got.Reference.Random || got.Reference.Hash != id.Hash || got.Reference.PolicyStart != "feed" {
		t.Fatalf("reference %+v", got.Reference)
	}
	if src, err := os.ReadFile(filepath.Join(run.Dir, "recipe.lua")); err != nil || string(src) != "-- recipe\n" {
		t.Fatalf("recipe.lua %q, %v", src, err)
	}
}
