package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// SamplesFile holds a few completions of each step, as a researcher reads them to see what
// the policy does (TRL's log_completions); DiscardedSamplesFile what a resume or a rollback
// took out of it, as for metrics.
const (
	SamplesFile          = "samples.jsonl"
	DiscardedSamplesFile = "samples-discarded.jsonl"
)

// Sample is one completion a step logged: its prompt and text, how it was scored and the
// advantage it was trained with.
type Sample struct {
	Step       int                `json:"step"`
	Index      int                `json:"index"` // 1-based, in the batch
	Group      int                `json:"group"` // 1-based: its prompt's group
	Task       string             `json:"task,omitempty"`
	Prompt     string             `json:"prompt"`
	Completion string             `json:"completion"`
	Tokens     int                `json:"tokens"`
	Truncated  bool               `json:"truncated"`
	Stop       string             `json:"stop,omitempty"` // the stop string or rule that finished it
	Reward     *float64           `json:"reward,omitempty"`
	Components map[string]float64 `json:"components,omitempty"` // the reward's parts that apply to it
	Advantage  *float64           `json:"advantage,omitempty"`
}

func (r *Run) samplesPath() string { return filepath.Join(r.Dir, SamplesFile) }

// AppendSamples appends one line per sample to samples.jsonl. Non-finite numbers, which JSON
// cannot hold, are left out.
func (r *Run) AppendSamples(ss []Sample) error {
	if len(ss) == 0 {
		return nil
	}
	if err := r.writable("appending to " + SamplesFile); err != nil {
		return err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, s := range ss {
		s.Reward, s.Advantage = finiteOrNil(s.Reward), finiteOrNil(s.Advantage)
		for k, v := range s.Components {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				delete(s.Components, k)
			}
		}
		if err := enc.Encode(s); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(r.samplesPath(), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b.Bytes())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("appending to %s: %w", r.samplesPath(), err)
	}
	return nil
}

func finiteOrNil(v *float64) *float64 {
	if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
		return nil
	}
	return v
}

// rewindSamples moves the samples of steps after step to DiscardedSamplesFile (all of them
// for step < 0), so that samples.jsonl, like metrics.jsonl, holds the history that led to the
// run's weights. A line that does not parse (a crash tore it) is discarded too.
func (r *Run) rewindSamples(step int) error {
	b, err := os.ReadFile(r.samplesPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var keep, drop []byte
	for _, ln := range bytes.SplitAfter(b, []byte("\n")) {
		if len(bytes.TrimSpace(ln)) == 0 {
			continue
		}
		var s struct {
			Step *int `json:"step"`
		}
		if json.Unmarshal(ln, &s) == nil && s.Step != nil && *s.Step <= step {
			keep = append(keep, ln...)
		} else {
			if ln[len(ln)-1] != '\n' {
				ln = append(ln, '\n')
			}
			drop = append(drop, ln...)
		}
	}
	if len(drop) == 0 {
		return nil
	}
	return moveLines(filepath.Join(r.Dir, DiscardedSamplesFile), r.samplesPath(), keep, drop)
}

// ReadSamples returns the samples of the run directory dir in file order. A line that does
// not parse is a *DataError naming it, except a last line without its newline: a run writing
// it now, or one a crash tore, which is left out.
func ReadSamples(dir string) ([]Sample, error) {
	path := filepath.Join(dir, SamplesFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Sample
	lines := bytes.SplitAfter(b, []byte("\n"))
	for i, ln := range lines {
		if len(bytes.TrimSpace(ln)) == 0 {
			continue
		}
		var s Sample
		if err := json.Unmarshal(ln, &s); err != nil {
			if i == len(lines)-1 && !bytes.HasSuffix(ln, []byte("\n")) {
				break
			}
			return out, &DataError{File: path, Line: i + 1, Err: err}
		}
		out = append(out, s)
	}
	return out, nil
}

// String is the sample as people read it: a header line (where it is in the batch, how it scored,
// how long it is), then its prompt and completion with control characters escaped, so one
// sample's text cannot break the layout.
func (s Sample) String() string {
	var h strings.Builder
	fmt.Fprintf(&h, "step %d · completion %d (group %d", s.Step, s.Index, s.Group)
	if s.Task != "" {
		h.WriteString(", " + s.Task)
	}
	h.WriteString(")")
	if s.Reward != nil {
		fmt.Fprintf(&h, " · reward %.3f", *s.Reward)
		if len(s.Components) > 0 {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(s.Components)) {
				parts = append(parts, fmt.Sprintf("%s %.3g", k, s.Components[k]))
			}
			h.WriteString(" (" + strings.Join(parts, ", ") + ")")
		}
	}
	if s.Advantage != nil {
		fmt.Fprintf(&h, " · advantage %+.3g", *s.Advantage)
	}
	fmt.Fprintf(&h, " · %d tokens", s.Tokens)
	if s.Truncated {
		h.WriteString(", TRUNCATED")
	}
	if s.Stop != "" {
		fmt.Fprintf(&h, ", stopped by %q", s.Stop)
	}
	completion := visible(s.Completion)
	if completion == "" {
		completion = "(empty)"
	}
	return fmt.Sprintf("%s\n  prompt      %s\n  completion  %s", h.String(), visible(strings.TrimSpace(s.Prompt)), completion)
}

// visible escapes control characters (a newline in a completion as \n) and leaves the rest.
func visible(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			q := strconv.QuoteRune(r) // '\n', '\x00'
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
