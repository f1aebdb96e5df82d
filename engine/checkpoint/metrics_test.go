package checkpoint

import (
	"fmt"
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
	run, err := Create(dir, Options{KeepLast: DefaultKeepLast})
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
	run.Close()
	run, err = Create(dir, Options{KeepLast: DefaultKeepLast, Resume: true})
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

// TestRewindMetrics: a resume or rollback to a checkpoint takes the records logged after its
// save out of metrics.jsonl (into the discarded file), so the steps the run repeats appear
// once; an evaluation logged at the checkpoint's step after the save goes too. A new run in a
// directory whose last run never saved starts an empty log.
func TestRewindMetrics(t *testing.T) {
	id := smallIdentity(t)
	dir := filepath.Join(t.TempDir(), "run")
	run, err := Create(dir, Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	steps := func() []string {
		t.Helper()
		recs, _, err := run.ReadMetrics()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			s := fmt.Sprint(r["step"])
			if _, ok := r["eval/reward"]; ok {
				s += "e"
			}
			out = append(out, s)
		}
		return out
	}
	discarded := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, DiscardedMetricsFile))
		return string(b)
	}
	logStep := func(step int, eval bool) {
		t.Helper()
		m := map[string]float64{"loss": float64(step)}
		if eval {
			m = map[string]float64{"eval/reward": float64(step)}
		}
		if err := run.AppendMetrics(step, m); err != nil {
			t.Fatal(err)
		}
	}
	logStep(0, true)
	logStep(1, false)
	logStep(2, false)
	mustSave(t, run, plainState(t, 2, id, nil))
	logStep(2, true) // the final evaluation, after the last save
	logStep(3, false)
	st, err := run.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := run.RewindMetrics(st); err != nil || n != 2 {
		t.Fatalf("RewindMetrics: %d records, %v; want 2", n, err)
	}
	if got := strings.Join(steps(), " "); got != "0e 1 2" {
		t.Fatalf("after rewind: %s, want 0e 1 2", got)
	}
	if d := discarded(); strings.Count(d, "\n") != 2 || !strings.Contains(d, `"step":3`) {
		t.Fatalf("discarded records:\n%s", d)
	}
	if n, err := run.RewindMetrics(st); err != nil || n != 0 {
		t.Fatalf("second rewind: %d, %v", n, err)
	}

	// A checkpoint that did not record the log's size: records after its step go.
	logStep(3, false)
	logStep(4, false)
	old := *st
	old.MetricsBytes = -1
	if n, err := run.RewindMetrics(&old); err != nil || n != 2 {
		t.Fatalf("rewind by step: %d, %v", n, err)
	}
	if got := strings.Join(steps(), " "); got != "0e 1 2" {
		t.Fatalf("after rewind by step: %s", got)
	}

	// A new run where the last one saved nothing.
	other := filepath.Join(t.TempDir(), "run")
	r2, err := Create(other, Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	r2.AppendMetrics(1, map[string]float64{"loss": 1})
	r2.Close()
	r2, err = Create(other, Options{KeepLast: DefaultKeepLast})
	if err != nil {
		t.Fatal(err)
	}
	if recs, _, _ := r2.ReadMetrics(); len(recs) != 0 {
		t.Fatalf("a new run inherited %d records", len(recs))
	}
	if b, _ := os.ReadFile(filepath.Join(other, DiscardedMetricsFile)); !strings.Contains(string(b), `"step":1`) {
		t.Fatalf("the old records are not kept aside: %q", b)
	}
}
