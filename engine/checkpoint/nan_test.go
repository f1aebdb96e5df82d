package checkpoint

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/safetensors"
)

// checkpointFinite reads every tensor of every safetensors file of a checkpoint directly
// from disk and reports the first non-finite value.
func checkpointFinite(t *testing.T, ck string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(ck, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".safetensors") {
			return err
		}
		st, err := safetensors.Read(p)
		if err != nil {
			return err
		}
		for _, name := range st.Names() {
			tn := st.Tensors[name]
			if tn.DType != "F32" {
				continue
			}
			v, err := tn.Float32s()
			if err != nil {
				return err
			}
			for i, x := range v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("%s: %s[%d] = %g", p, name, i, x)
				}
			}
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 4 {
		t.Fatalf("%s: only %d float tensors checked", ck, n)
	}
}

// TestNaNStepNeverReachesWeightsOrCheckpoints is issue 6 item 4(e) on the Go side: a NaN
// injected into the gradient at step k (grpo's AfterBackward hook) skips that step's updates,
// nothing non-finite reaches the weights or any checkpoint saved afterwards, the run goes on,
// a rollback to the last checkpoint restores it exactly, and Save refuses non-finite weights.
func TestNaNStepNeverReachesWeightsOrCheckpoints(t *testing.T) {
	const k, steps = 3, 6
	refDir := writeModel(t, tinyConfig, 5)
	run, err := Create(filepath.Join(t.TempDir(), "run"), Options{KeepLast: -1})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, refDir, 1)
	h.nanAt = k
	var saved []string
	for range steps {
		before := h.policy.ParamsHost()
		optSteps := h.opt.Steps
		m := h.trainStep()
		if err := run.AppendMetrics(h.step, m); err != nil {
			t.Fatal(err)
		}
		if h.step == k {
			if m["skipped"] != 2 || m["finite"] != 0 || m["updates"] != 0 || m["nonfinite_grad"] != 2 {
				t.Fatalf("NaN step metrics: skipped %g finite %g updates %g", m["skipped"], m["finite"], m["updates"])
			}
			if !bitsEqual(before, h.policy.ParamsHost()) || h.opt.Steps != optSteps {
				t.Fatal("the NaN step changed the weights or the optimizer")
			}
		} else if m["updates"] != 2 || m["finite"] != 1 {
			t.Fatalf("step %d: updates %g finite %g: the run did not continue normally", h.step, m["updates"], m["finite"])
		}
		for i, x := range h.policy.ParamsHost() {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("step %d: weight %d = %g", h.step, i, x)
			}
		}
		saved = append(saved, mustSave(t, run, h.state()))
	}
	for _, name := range saved {
		checkpointFinite(t, filepath.Join(run.Dir, "checkpoints", name))
		if _, err := run.Load(name); err != nil {
			t.Fatal(err)
		}
	}
	recs, skipped, err := run.ReadMetrics()
	if err != nil || len(skipped) > 0 || len(recs) != steps {
		t.Fatalf("metrics: %d records, skipped %v, %v", len(recs), skipped, err)
	}
	if recs[k-1]["finite"] != 0.0 || recs[k-1]["skipped"] != 2.0 {
		t.Fatalf("metrics.jsonl step %d: %v", k, recs[k-1])
	}

	// Rollback: live objects return exactly to the checkpoint of step k-1.
	st, err := run.Load(saved[k-2])
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(h.policy, h.opt); err != nil {
		t.Fatal(err)
	}
	m, v := h.opt.Export()
	if !bitsEqual(h.policy.ParamsHost(), st.Params) || !bitsEqual(m, st.Optimizer.M) || !bitsEqual(v, st.Optimizer.V) || h.opt.Steps != st.Optimizer.Steps {
		t.Fatal("rollback did not restore the checkpoint's weights and optimizer state")
	}

	// Non-finite weights or moments are refused, and LATEST stays where it was.
	bad := h.state()
	bad.Step = steps + 1
	l := gpt2.NewLayout(tinyConfig)
	wpe, _ := l.Lookup("wpe.weight")
	bad.Params[wpe.Off+3] = float32(math.Inf(-1))
	_, err = run.Save(bad)
	wantErr(t, err, "policy weights", "wpe.weight[3]", "non-finite")
	bad = h.state()
	bad.Step = steps + 1
	bad.Optimizer.V[0] = float32(math.NaN())
	_, err = run.Save(bad)
	wantErr(t, err, "optimizer v", "wte.weight[0]")
	if latest, err := run.LatestName(); err != nil || latest != saved[len(saved)-1] {
		t.Fatalf("LATEST = %q, %v after refused saves", latest, err)
	}
	entries, _ := os.ReadDir(filepath.Join(run.Dir, "checkpoints"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Fatalf("a refused save left %s", e.Name())
		}
	}
}
