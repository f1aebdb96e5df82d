package checkpoint

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Samples append as JSON lines (non-finite numbers left out), read back in order, and follow
// metrics.jsonl on a rewind: the samples of steps after the checkpoint move to
// samples-discarded.jsonl, and a new run starts without the old run's.
func TestSamples(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r, err := Create(dir, Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	f := func(v float64) *float64 { return &v }
	for step := 1; step <= 3; step++ {
		err := r.AppendSamples([]Sample{
			{Step: step, Index: 1, Group: 1, Task: "P", Prompt: "P: fen", Completion: "M: e2e4", Tokens: 5, Reward: f(-0.3),
				Components: map[string]float64{"format": 0, "legal": math.NaN()}, Advantage: f(math.Inf(1))},
			{Step: step, Index: 5, Group: 2, Task: "A", Prompt: "A: fen+e2e4+", Completion: "x", Tokens: 48, Truncated: true},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadSamples(dir)
	if err != nil || len(got) != 6 {
		t.Fatalf("read %d samples: %v", len(got), err)
	}
	s := got[0]
	if s.Reward == nil || *s.Reward != -0.3 || s.Advantage != nil || len(s.Components) != 1 || s.Task != "P" || !got[1].Truncated {
		t.Errorf("first samples read back as %+v, %+v", s, got[1])
	}
	if _, err := r.RewindMetrics(&State{Step: 1, MetricsBytes: -1}); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadSamples(dir); len(got) != 2 || got[1].Step != 1 {
		t.Errorf("after a rewind to step 1: %+v", got)
	}
	b, _ := os.ReadFile(filepath.Join(dir, DiscardedSamplesFile))
	if n := strings.Count(string(b), "\n"); n != 4 {
		t.Errorf("%d samples discarded, want 4", n)
	}
	// A bad line is an error naming it; a last line without its newline (being written, or
	// torn by a crash) is left out.
	os.WriteFile(filepath.Join(dir, SamplesFile), []byte(`{"step":1}`+"\n"+`{"step":`+"\n"+`{"step":3}`+"\n"), 0o644)
	var de *DataError
	if _, err := ReadSamples(dir); !errors.As(err, &de) || de.File != filepath.Join(dir, SamplesFile) || de.Line != 2 {
		t.Errorf("a bad line: %v", err)
	}
	os.WriteFile(filepath.Join(dir, SamplesFile), []byte(`{"step":1}`+"\n"+`{"step":`), 0o644)
	if got, err := ReadSamples(dir); err != nil || len(got) != 1 {
		t.Errorf("a torn last line: %d samples, %v", len(got), err)
	}
	r.Close()
	// A new run in the directory (no checkpoint was saved) starts without the old samples.
	r, err = Create(dir, Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := ReadSamples(dir); err != nil || len(got) != 0 {
		t.Errorf("a new run sees %d old samples (%v)", len(got), err)
	}
}
