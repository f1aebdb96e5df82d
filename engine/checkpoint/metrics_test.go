package checkpoint

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMetricsLog: lines round-trip exactly (non-finite values included), a torn last line
// is skipped and reported, and a resumed run's first line does not glue onto the fragment.
func TestMetricsLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	run, err := Create(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if recs, skipped, err := run.ReadMetrics(); recs != nil || skipped != nil || err != nil {
		t.Fatalf("empty log: %v %v %v", recs, skipped, err)
	}
	third := 1.0 / 3
	for step, m := range []map[string]float64{
		{"loss": third, "kl": 1e-300},
		{"loss": math.NaN(), "grad_norm": math.Inf(1), "x": math.Inf(-1)},
	} {
		if err := run.AppendMetrics(step+1, m); err != nil {
			t.Fatal(err)
		}
	}
	wantErr(t, run.AppendMetrics(3, map[string]float64{"step": 1}), `"step" is a reserved name`)

	path := filepath.Join(dir, "metrics.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"step":3,"time":"2026-01-0`) // the crash
	f.Close()

	recs, skipped, err := run.ReadMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || len(skipped) != 1 || !strings.Contains(skipped[0], "metrics.jsonl:3") || !strings.Contains(skipped[0], "torn") {
		t.Fatalf("records %v skipped %q", recs, skipped)
	}
	r0, r1 := recs[0], recs[1]
	if r0["step"] != 1 || r0["loss"] != third || r0["kl"] != 1e-300 || r1["step"] != 2 {
		t.Fatalf("records %v", recs)
	}
	if !math.IsNaN(r1["loss"].(float64)) || !math.IsInf(r1["grad_norm"].(float64), 1) || !math.IsInf(r1["x"].(float64), -1) {
		t.Fatalf("non-finite values came back as %v", r1)
	}
	if _, ok := r0["time"].(string); !ok {
		t.Fatalf("no time in %v", r0)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), `{"step":1,"time":"`) {
		t.Fatalf("line does not start with step and time: %s", b)
	}

	// Resume: the fragment gets its newline, the next line is whole.
	run, err = Create(dir, Options{Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.AppendMetrics(3, map[string]float64{"loss": 2}); err != nil {
		t.Fatal(err)
	}
	recs, skipped, err = run.ReadMetrics()
	if err != nil || len(recs) != 3 || recs[2]["step"] != 3 || recs[2]["loss"] != 2.0 || len(skipped) != 1 || !strings.Contains(skipped[0], "corrupt line") {
		t.Fatalf("after resume: records %v skipped %q err %v", recs, skipped, err)
	}
}
