package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode/utf8"
)

// series is one measurement: a value per timed run, or the reason it was not measured.
// When the process's CPU time was taken around each run, wall, cpu and sys hold the run's
// wall-clock, CPU (user + system, all threads) and system milliseconds: cpu/wall is how many
// cores the run kept busy, which on a shared machine shows how much of it the run got.
type series struct {
	samples        []float64 // in the row's unit
	wall, cpu, sys []float64 // ms per run; nil when not taken
	reason         string    // non-empty when not measured
}

func skipped(why string) series { return series{reason: why} }

// measured is a series of plain values.
func measured(s []float64) series { return series{samples: s} }

// fromRuns makes a series of value(r) over timed runs, keeping their CPU times.
func fromRuns(runs []sample, value func(sample) float64) series {
	var s series
	for _, r := range runs {
		s.samples = append(s.samples, value(r))
		s.wall, s.cpu, s.sys = append(s.wall, r.ms), append(s.cpu, r.cpu), append(s.sys, r.sys)
	}
	return s
}

func (s series) ok() bool { return s.reason == "" && len(s.samples) > 0 }

func (s series) median() float64 { return median(s.samples) }

func (s series) min() float64 {
	if len(s.samples) == 0 {
		return math.NaN()
	}
	return slices.Min(s.samples)
}

func (s series) max() float64 {
	if len(s.samples) == 0 {
		return math.NaN()
	}
	return slices.Max(s.samples)
}

// cores is the median over runs of CPU time / wall time, and of system time / wall time.
func (s series) cores() (busy, sys float64, ok bool) {
	if !s.ok() || len(s.wall) != len(s.samples) {
		return 0, 0, false
	}
	b, y := make([]float64, len(s.wall)), make([]float64, len(s.wall))
	for i, w := range s.wall {
		b[i], y[i] = s.cpu[i]/w, s.sys[i]/w
	}
	return median(b), median(y), true
}

// median of v (mean of the middle two for an even count); NaN for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// mapped applies f to every sample (ms → tokens/s, say), keeping CPU times and the reason.
func (s series) mapped(f func(float64) float64) series {
	if !s.ok() {
		return s
	}
	out := s
	out.samples = make([]float64, len(s.samples))
	for i, v := range s.samples {
		out.samples[i] = f(v)
	}
	return out
}

// sumSeries adds two series run by run (prefill + decode = one generation), CPU times too.
func sumSeries(a, b series) series {
	switch {
	case !a.ok():
		return a
	case !b.ok():
		return b
	case len(a.samples) != len(b.samples):
		return skipped("the parts have different run counts")
	}
	add := func(x, y []float64) []float64 {
		if len(x) != len(y) {
			return nil
		}
		out := make([]float64, len(x))
		for i := range x {
			out[i] = x[i] + y[i]
		}
		return out
	}
	return series{samples: add(a.samples, b.samples), wall: add(a.wall, b.wall), cpu: add(a.cpu, b.cpu), sys: add(a.sys, b.sys)}
}

// Row is one line of the table. A row that was not measured has no samples and says why in
// Note; a ratio row has no samples and its Median is the ratio of the two medians.
type Row struct {
	Degraded bool      `json:"degraded,omitempty"`    // a peer's figure from kernels below the processor's (flagDegraded)
	Loose    bool      `json:"loose_floor,omitempty"` // a ratio against a floor the run showed to be too slow (belowBandwidth, flagLooseFloors)
	Group    string    `json:"group"`
	Key      string    `json:"key"` // stable name for scripts: "engine.train_step", …
	Name     string    `json:"name"`
	Unit     string    `json:"unit"` // ms, GFLOP/s, tok/s or x (a ratio)
	Samples  []float64 `json:"samples,omitempty"`
	Median   *float64  `json:"median,omitempty"`
	Min      *float64  `json:"min,omitempty"`
	Max      *float64  `json:"max,omitempty"`
	GFLOPS   *float64  `json:"gflops,omitempty"` // achieved at the median time
	// Cores is the median of CPU time / wall time over the runs (the cores the run kept busy,
	// spinning threads included), SysCores the system-time part of it.
	Cores    *float64 `json:"cores,omitempty"`
	SysCores *float64 `json:"sys_cores,omitempty"`
	Note     string   `json:"note,omitempty"`
}

func ptr(v float64) *float64 { return &v }

// valueRow makes a row from a series; flop > 0 adds the GFLOP/s achieved at the median time
// (the unit must then be ms).
func valueRow(group, key, name, unit string, s series, flop float64) Row {
	r := Row{Group: group, Key: key, Name: name, Unit: unit}
	if !s.ok() {
		r.Note = "not measured: " + s.reason
		return r
	}
	r.Samples = s.samples
	r.Median, r.Min, r.Max = ptr(s.median()), ptr(s.min()), ptr(s.max())
	if flop > 0 {
		r.GFLOPS = ptr(flop / (*r.Median * 1e-3) / 1e9)
	}
	if busy, sys, ok := s.cores(); ok {
		r.Cores, r.SysCores = ptr(busy), ptr(sys)
	}
	return r
}

// ratioRow is num/den. Paired series were measured in alternation, run i of one beside run
// i of the other: the row is then the median of the per-pair ratios, with min and max the
// extreme pairs, which cancels most of the drift in a shared machine's load. Otherwise it is
// the ratio of the medians, with min and max the extreme ratios any two runs give
// (min(num)/max(den), max(num)/min(den)).
func ratioRow(group, key, name, note string, num, den series, paired bool) Row {
	r := Row{Group: group, Key: key, Name: name, Unit: "x", Note: note}
	switch {
	case !num.ok():
		r.Note = "not measured: " + num.reason
	case !den.ok():
		r.Note = "not measured: " + den.reason
	case paired && len(num.samples) == len(den.samples):
		q := pairedRatios(num, den)
		r.Samples = q
		r.Median, r.Min, r.Max = ptr(median(q)), ptr(slices.Min(q)), ptr(slices.Max(q))
		r.Note = joinNote(r.Note, "paired runs")
	default:
		r.Median = ptr(num.median() / den.median())
		r.Min = ptr(num.min() / den.max())
		r.Max = ptr(num.max() / den.min())
		r.Note = joinNote(r.Note, "ratio of medians")
	}
	return r
}

// pairedRatios is num / den run by run (series of as many runs).
func pairedRatios(num, den series) []float64 {
	q := make([]float64, len(num.samples))
	for i := range q {
		q[i] = num.samples[i] / den.samples[i]
	}
	return q
}

// joinNote appends part to a row's note, after a comma when the note already says something.
func joinNote(note, part string) string {
	if note == "" {
		return part
	}
	return note + ", " + part
}

// Report is everything one rookbench command measured.
type Report struct {
	Header  []string `json:"header"` // what was run, where, and how FLOPs are counted
	Rows    []Row    `json:"rows"`
	Notes   []string `json:"notes,omitempty"` // derived observations and warnings
	Summary string   `json:"summary,omitempty"`
	Meta    Meta     `json:"meta"`
}

// Meta is the machine-readable part of the header.
type Meta struct {
	Threads       int     `json:"threads"`
	Runs          int     `json:"runs"`
	Warmup        int     `json:"warmup"`
	Sections      string  `json:"sections"`
	Model         string  `json:"model"`
	Params        int     `json:"params"`
	Batch         int     `json:"batch"`
	Seq           int     `json:"seq"`
	ForwardGFLOP  float64 `json:"forward_gflop"`
	TrainGFLOP    float64 `json:"train_gflop"`
	FLOPFormula   string  `json:"flop_formula"`
	GoVersion     string  `json:"go"`
	BLAS          string  `json:"blas"`
	CPU           string  `json:"cpu"`
	HugePages     string  `json:"transparent_huge_pages"` // the system's mode: always, madvise or never
	CPUIdle       string  `json:"cpuidle,omitempty"`      // how the kernel idles a CPU (cpuIdle)
	Kernels       string  `json:"engine_kernels"`         // the widest vector instructions the engine's CPU kernels run (cpu.Capability)
	Device        string  `json:"device"`
	Torch         string  `json:"torch,omitempty"`
	LoadAvgBefore string  `json:"loadavg_before"`
	LoadAvgAfter  string  `json:"loadavg_after"`
	Started       string  `json:"started"`
	Seconds       float64 `json:"seconds"`
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	e.SetEscapeHTML(false)
	return e.Encode(r)
}

// WriteTable writes the header, the table (rows grouped under their group's title) and the
// notes as plain text.
func (r *Report) WriteTable(w io.Writer) {
	for _, h := range r.Header {
		fmt.Fprintln(w, h)
	}
	fmt.Fprintln(w)
	cols := []string{"measurement", "median", "min", "max", "unit", "GFLOP/s", "cores (sys)", "note"}
	cells := make([][]string, 0, len(r.Rows))
	for _, row := range r.Rows {
		c := []string{"  " + row.Name, num(row.Median, row.Unit), num(row.Min, row.Unit),
			num(row.Max, row.Unit), row.Unit, "", "", row.Note}
		if row.GFLOPS != nil {
			c[5] = num(row.GFLOPS, "GFLOP/s")
		}
		if row.Cores != nil {
			c[6] = fmt.Sprintf("%.2f (%.2f)", *row.Cores, *row.SysCores)
		}
		cells = append(cells, c)
	}
	width := make([]int, len(cols))
	for i, c := range cols {
		width[i] = utf8.RuneCountInString(c)
	}
	for _, c := range cells {
		for i, s := range c[:len(c)-1] { // the note is last and left unpadded
			width[i] = max(width[i], utf8.RuneCountInString(s))
		}
	}
	line := func(c []string) {
		var b strings.Builder
		for i, s := range c {
			pad := strings.Repeat(" ", max(0, width[i]-utf8.RuneCountInString(s)))
			switch {
			case i == 0 || i == 4: // text columns: left-aligned
				b.WriteString(s + pad)
			case i == len(c)-1:
				b.WriteString(s)
			default:
				b.WriteString(pad + s)
			}
			if i < len(c)-1 {
				b.WriteString("  ")
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(cols)
	group := ""
	for i, row := range r.Rows {
		if row.Group != group {
			group = row.Group
			fmt.Fprintln(w, group)
		}
		line(cells[i])
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range r.Notes {
			fmt.Fprintln(w, "* "+n)
		}
	}
	if r.Summary != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, r.Summary)
	}
}

// num formats a cell: ratios with two decimals, everything else with one, or with three
// significant digits below 1 (a GPU's floors are fractions of a millisecond or second); "-"
// when absent.
func num(v *float64, unit string) string {
	switch {
	case v == nil || math.IsNaN(*v):
		return "-"
	case unit == "x":
		return fmt.Sprintf("%.2f", *v)
	case *v != 0 && math.Abs(*v) < 1:
		return fmt.Sprintf("%.3g", *v)
	default:
		return fmt.Sprintf("%.1f", *v)
	}
}
