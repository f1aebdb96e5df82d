package checkpoint

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func listNames(t *testing.T, r *Run) []string {
	t.Helper()
	names, err := r.List()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func pointers(t *testing.T, r *Run) (latest, best string) {
	t.Helper()
	latest, err := r.LatestName()
	if err != nil {
		t.Fatal(err)
	}
	if best, err = r.Best(); err != nil {
		t.Fatal(err)
	}
	return latest, best
}

// TestKeepLastAndBest: keep-last-N plus the best checkpoint by a metric, min or max; LATEST
// and BEST are never pruned; non-finite values never win; replacing the best checkpoint with
// a worse one re-elects the best.
func TestKeepLastAndBest(t *testing.T) {
	id := smallIdentity(t)
	for _, c := range []struct {
		mode      string
		keep      int
		scores    []float64
		wantNames []int
		wantBest  int
	}{
		{"max", 2, []float64{0.1, 0.9, 0.3, 0.2, 0.5, 0.4}, []int{2, 5, 6}, 2},
		{"min", 1, []float64{0.5, 0.2, 0.7, math.NaN(), 0.3, 0.9}, []int{2, 6}, 2},
		{"max", 3, []float64{0.1, 0.2, 0.3, 0.4, 0.5}, []int{3, 4, 5}, 5},
		{"max", -1, []float64{0.3, math.Inf(1), 0.1}, []int{1, 2, 3}, 1},
	} {
		run, err := Create(filepath.Join(t.TempDir(), "run"), Options{KeepLast: c.keep, BestMetric: "score", BestMode: c.mode})
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range c.scores {
			mustSave(t, run, plainState(t, i+1, id, map[string]float64{"score": s, "loss": 1}))
		}
		var want []string
		for _, s := range c.wantNames {
			want = append(want, stepName(s))
		}
		latest, best := pointers(t, run)
		if got := listNames(t, run); !slices.Equal(got, want) || latest != stepName(len(c.scores)) || best != stepName(c.wantBest) {
			t.Fatalf("%s keep %d %v: checkpoints %v LATEST %s BEST %s, want %v LATEST %s BEST %s",
				c.mode, c.keep, c.scores, got, latest, best, want, stepName(len(c.scores)), stepName(c.wantBest))
		}
		// Open recovers the retention options from the checkpoint.
		wantOpts := run.Options()
		wantOpts.Resume = true
		if r, err := OpenReadOnly(run.Dir); err != nil || r.Options() != wantOpts {
			t.Fatalf("Open options %+v, want %+v (%v)", r.Options(), wantOpts, err)
		}
	}

	// Re-saving the best step with a worse score moves BEST to the best of what is left.
	run, err := Create(filepath.Join(t.TempDir(), "run"), Options{KeepLast: 2, BestMetric: "score", BestMode: "max"})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []float64{0.1, 0.9, 0.3, 0.8} {
		mustSave(t, run, plainState(t, i+1, id, map[string]float64{"score": s}))
	}
	mustSave(t, run, plainState(t, 2, id, map[string]float64{"score": 0}))
	latest, best := pointers(t, run)
	if latest != stepName(2) || best != stepName(4) || !slices.Equal(listNames(t, run), []string{stepName(2), stepName(3), stepName(4)}) {
		t.Fatalf("after replacing the best: %v LATEST %s BEST %s", listNames(t, run), latest, best)
	}
	// After a rollback the run saves a lower step: it becomes LATEST and is kept.
	mustSave(t, run, plainState(t, 3, id, map[string]float64{"score": 0.2}))
	mustSave(t, run, plainState(t, 1, id, map[string]float64{"score": 0.2}))
	latest, _ = pointers(t, run)
	if names := listNames(t, run); latest != stepName(1) || !slices.Contains(names, stepName(1)) {
		t.Fatalf("after saving a lower step: %v LATEST %s", names, latest)
	}
	if st, err := run.Latest(); err != nil || st.Step != 1 {
		t.Fatalf("Latest after saving a lower step: %v", err)
	}

	// A metric missing from non-empty metrics is a configuration error, not a silent no-best.
	_, err = run.Save(plainState(t, 9, id, map[string]float64{"reward": 1}))
	wantErr(t, err, `best metric "score"`)
	// Empty metrics (an initial save) are fine.
	mustSave(t, run, plainState(t, 9, id, nil))
}

// TestCreateRefusesExistingRun: a new run cannot take over a directory with checkpoints.
func TestCreateRefusesExistingRun(t *testing.T) {
	id := smallIdentity(t)
	dir := filepath.Join(t.TempDir(), "run")
	run, err := Create(dir, Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	mustSave(t, run, plainState(t, 5, id, nil))
	run.Close()
	_, err = Create(dir, Options{KeepLast: DefaultKeepLast})
	wantErr(t, err, "already holds checkpoints", "step-00000005")
	if _, err := Create(dir, Options{KeepLast: DefaultKeepLast, Resume: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "nothing")); err == nil {
		t.Fatal("Open of a directory that is not a run succeeded")
	}
	_, err = Create(dir, Options{KeepLast: DefaultKeepLast, BestMetric: "reward"})
	wantErr(t, err, `"min" or "max"`)
	_, err = Create(dir, Options{KeepLast: DefaultKeepLast, BestMode: "max", Resume: true})
	wantErr(t, err, "without a best metric")
}

// TestLeftoversIgnoredAndRemoved: temporary directories of an interrupted save are not
// checkpoints, and the next save removes them.
func TestLeftoversIgnoredAndRemoved(t *testing.T) {
	id := smallIdentity(t)
	run, err := Create(filepath.Join(t.TempDir(), "run"), Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	mustSave(t, run, plainState(t, 1, id, nil))
	left := filepath.Join(run.Dir, "checkpoints", ".tmp-step-00000002-123")
	if err := os.MkdirAll(filepath.Join(left, "model"), 0o755); err != nil {
		t.Fatal(err)
	}
	if names := listNames(t, run); !slices.Equal(names, []string{stepName(1)}) {
		t.Fatalf("List = %v", names)
	}
	mustSave(t, run, plainState(t, 2, id, nil))
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("leftover still there: %v", err)
	}
}

// TestKeepZeroIsAnError: keep 0 (a typo, or an unset field) is refused by name rather than
// read as a default.
func TestKeepZeroIsAnError(t *testing.T) {
	for _, o := range []Options{{}, {KeepLast: 0, BestMetric: "score", BestMode: "max"}} {
		_, err := Create(filepath.Join(t.TempDir(), "run"), o)
		wantErr(t, err, "keep 0")
	}
	for _, keep := range []int{1, -1} {
		run, err := Create(filepath.Join(t.TempDir(), "run"), Options{KeepLast: keep})
		if err != nil {
			t.Fatalf("keep %d: %v", keep, err)
		}
		run.Close()
	}
}

// TestPreflight: Preflight gives Create's and Open's refusals for what is on disk, and creates
// and locks nothing.
func TestPreflight(t *testing.T) {
	id := smallIdentity(t)
	root := t.TempDir()
	withCk := filepath.Join(root, "run")
	run, err := Create(withCk, Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	mustSave(t, run, plainState(t, 5, id, nil))
	run.Close()
	held := filepath.Join(root, "held")
	holder, err := Create(held, Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	empty, missing, file := filepath.Join(root, "empty"), filepath.Join(root, "missing"), filepath.Join(root, "file")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(root, "model") // a folder that is not a run: never written into
	if err := os.Mkdir(model, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors"} {
		if err := os.WriteFile(filepath.Join(model, f), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir    string
		resume bool
		want   []string // nil: no error
	}{
		{missing, false, nil},
		{empty, false, nil},
		{withCk, false, []string{"already holds checkpoints", "step-00000005"}},
		{withCk, true, nil},
		{held, false, []string{"is in use by", "one process writes a run at a time"}},
		{held, true, []string{"is in use by"}},
		{missing, true, []string{missing + " does not exist"}},
		{empty, true, []string{"is not a run directory"}},
		{file, false, []string{"is not a directory"}},
		{model, false, []string{model + " is not a run directory and is not empty (it holds config.json, model.safetensors)"}},
	} {
		err := Preflight(tc.dir, tc.resume)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%s resume=%v: %v", filepath.Base(tc.dir), tc.resume, err)
			}
			continue
		}
		wantErr(t, err, tc.want...)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("Preflight created %s", missing)
	}
	if _, err := os.Stat(filepath.Join(empty, LockFile)); !os.IsNotExist(err) {
		t.Errorf("Preflight created a lock file in %s", empty)
	}
	// Create refuses the folder that is not a run too, and writes nothing into it.
	var nr *NotRunError
	if _, err := Create(model, Options{KeepLast: DefaultKeepLast}); !errors.As(err, &nr) || nr.Dir != model || len(nr.Holds) == 0 {
		t.Errorf("Create in a model folder: %v", err)
	}
	if entries, _ := os.ReadDir(model); len(entries) != 2 {
		t.Errorf("Create wrote into the model folder: %d entries", len(entries))
	}
	// A preflight takes no lock that outlives it: the run it checked opens for writing.
	r, err := Open(withCk)
	if err != nil {
		t.Fatalf("Open after Preflight: %v", err)
	}
	r.Close()
}
