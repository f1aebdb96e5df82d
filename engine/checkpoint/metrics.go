package checkpoint

import (
	"github.com/rookscript/rookscript/engine/atomicfile"

	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

const timeLayout = "2006-01-02T15:04:05.000Z07:00" // RFC 3339 with milliseconds

func (r *Run) metricsPath() string { return filepath.Join(r.Dir, "metrics.jsonl") }

// DiscardedMetricsFile, in the run directory, collects the records that a resume or a
// rollback takes out of metrics.jsonl: steps logged after the checkpoint the run goes back
// to, which the run then logs again. Nothing logged is lost, and metrics.jsonl holds one
// record per step (and per evaluation) of the history that led to the run's weights.
const DiscardedMetricsFile = "metrics-discarded.jsonl"

// AppendMetrics is AppendMetricsAt the current time.
func (r *Run) AppendMetrics(step int, m map[string]float64) error {
	return r.AppendMetricsAt(step, time.Now(), m)
}

// AppendMetricsAt appends {"step": step, "time": t, ...m} as one line of metrics.jsonl, t in
// UTC to the millisecond. Non-finite values are written as the strings "NaN", "Infinity" and
// "-Infinity". A caller that records the same values elsewhere (TensorBoard) passes the time
// it records there.
func (r *Run) AppendMetricsAt(step int, t time.Time, m map[string]float64) error {
	if err := r.writable("appending to metrics.jsonl"); err != nil {
		return err
	}
	line, err := metricsLine(step, t, m)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(r.metricsPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	// One write of the whole line: with O_APPEND it lands at the end in one piece, and a
	// crash can at worst tear this last line, which the reader skips.
	_, err = f.Write(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("appending to %s: %w", r.metricsPath(), err)
	}
	return nil
}

func metricsLine(step int, t time.Time, m map[string]float64) ([]byte, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k == "step" || k == "time" {
			return nil, fmt.Errorf("metrics: %q is a reserved name in metrics.jsonl", k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"step":%d,"time":%q`, step, t.UTC().Format(timeLayout))
	for _, k := range keys {
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		vb, err := json.Marshal(metricValue(m[k]))
		if err != nil {
			return nil, err
		}
		b.WriteByte(',')
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// endTornMetricsLine terminates a last line a crash left without its newline, so the next
// append starts a line of its own instead of gluing onto the fragment.
func (r *Run) endTornMetricsLine() error {
	f, err := os.OpenFile(r.metricsPath(), os.O_RDWR|os.O_APPEND, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, fi.Size()-1); err != nil && err != io.EOF {
		return err
	}
	if last[0] == '\n' {
		return nil
	}
	if _, err := f.Write([]byte("\n")); err != nil {
		return err
	}
	return f.Sync()
}

// RewindMetrics takes out of metrics.jsonl every record logged after checkpoint st was saved
// (the steps a resume or a rollback repeats), moves them to DiscardedMetricsFile and returns
// how many it moved; the samples of later steps move to DiscardedSamplesFile. metrics.jsonl
// is rewritten atomically. For a checkpoint that did not record the log's size
// (st.MetricsBytes < 0: written by an older version) or a log shorter than that size, the
// records of steps after st.Step are the ones taken out.
func (r *Run) RewindMetrics(st *State) (int, error) {
	if err := r.writable("rewinding metrics.jsonl"); err != nil {
		return 0, err
	}
	if err := r.rewindSamples(st.Step); err != nil {
		return 0, err
	}
	b, err := os.ReadFile(r.metricsPath())
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if n := st.MetricsBytes; n >= 0 && n <= int64(len(b)) && (n == 0 || b[n-1] == '\n') {
		return r.splitMetrics(b[:n], b[n:])
	}
	var keep, drop []byte
	for _, ln := range bytes.SplitAfter(b, []byte("\n")) {
		if len(bytes.TrimSpace(ln)) == 0 {
			continue
		}
		if rec, err := parseMetricsLine(bytes.TrimSpace(ln)); err == nil && rec["step"].(int) <= st.Step {
			keep = append(keep, ln...)
		} else {
			drop = append(drop, ln...)
		}
	}
	return r.splitMetrics(keep, drop)
}

// discardMetricsFrom moves the part of metrics.jsonl from byte offset on to the discarded
// records.
func (r *Run) discardMetricsFrom(offset int) (int, error) {
	b, err := os.ReadFile(r.metricsPath())
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return r.splitMetrics(b[:min(offset, len(b))], b[min(offset, len(b)):])
}

// splitMetrics makes keep the content of metrics.jsonl and appends drop to the discarded
// records first, so that a crash in between leaves a record in both files, never in neither.
func (r *Run) splitMetrics(keep, drop []byte) (int, error) {
	n := 0
	for _, ln := range bytes.Split(drop, []byte("\n")) {
		if len(bytes.TrimSpace(ln)) > 0 {
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	if len(drop) > 0 && drop[len(drop)-1] != '\n' {
		drop = append(drop, '\n') // a torn last line stays a line of its own
	}
	if err := moveLines(filepath.Join(r.Dir, DiscardedMetricsFile), r.metricsPath(), keep, drop); err != nil {
		return 0, err
	}
	return n, nil
}

// moveLines appends drop to the discarded file (synced) and then makes keep the content of
// the log, so that a crash in between leaves a line in both files, never in neither.
func moveLines(discarded, log string, keep, drop []byte) error {
	f, err := os.OpenFile(discarded, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(drop)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("appending to %s: %w", discarded, err)
	}
	return atomicfile.WriteBytes(log, keep)
}

// ReadMetrics returns the records of metrics.jsonl in file order: "step" as an int, "time" as
// a string and every metric as a float64. Lines that do not parse (a line torn by a crash)
// are skipped and described in skipped. A resumed or rolled-back run has taken the records
// after its checkpoint out (RewindMetrics), so each step appears once.
func (r *Run) ReadMetrics() (records []map[string]any, skipped []string, err error) {
	b, err := os.ReadFile(r.metricsPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	for i, ln := range bytes.SplitAfter(b, []byte("\n")) {
		text := bytes.TrimSpace(ln)
		if len(text) == 0 {
			continue
		}
		rec, err := parseMetricsLine(text)
		if err != nil {
			why := "corrupt line (torn by a crash, then ended by the next run)"
			if !bytes.HasSuffix(ln, []byte("\n")) {
				why = "torn last line (no newline)"
			}
			skipped = append(skipped, fmt.Sprintf("%s:%d: skipped a %s: %v", r.metricsPath(), i+1, why, err))
			continue
		}
		records = append(records, rec)
	}
	return records, skipped, nil
}

func parseMetricsLine(text []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the object")
	}
	rec := make(map[string]any, len(raw))
	for k, v := range raw {
		switch k {
		case "step":
			n, ok := v.(json.Number)
			if !ok {
				return nil, fmt.Errorf("step %v is not a number", v)
			}
			s, err := n.Int64()
			if err != nil {
				return nil, fmt.Errorf("step %v is not an integer", v)
			}
			rec[k] = int(s)
		case "time":
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("time %v is not a string", v)
			}
			rec[k] = s
		default:
			f, ok := metricFloat(v)
			if !ok {
				return nil, fmt.Errorf("metric %q: %v is not a number", k, v)
			}
			rec[k] = f
		}
	}
	if _, ok := rec["step"]; !ok {
		return nil, errors.New("no step")
	}
	return rec, nil
}
