package main

import (
	"bytes"
	byteorder "encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"image/color"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/rookscript/rookscript/engine/atomicfile"
)

const plotUsage = `Usage: rookscript plot RUN_DIR [RUN_DIR ...] [-o OUT.png] [-f]

Writes one PNG of the runs' metrics.jsonl over steps, a panel for each quantity some run
logged: reward (mean ± std, and eval/reward_mean), loss and pg_loss, KL (mean and per-token
max), learning rate, entropy, clip ratios, gradient norm, tokens/s, batch shares (truncated
completions, groups with no reward spread, clamped KL) and the evaluation shares of P: and
A: answers. Shares are drawn on a 0–1 axis. Several runs overlay, one colour each, named by
the settings in which their config.json files differ (adamw.lr=1e-4, grpo.beta=0), or else
by their directory's name. An argument that is not a run directory (no metrics.jsonl) is
skipped with a note. Reading a run needs no lock: a running run can be plotted.

Output: RUN_DIR/metrics.png for one run (the run's own figure, redrawn each time);
compare.png beside the first run directory for several (redrawn each time, unless a
compare.png there is not one plot drew); or -o OUT.png. An existing file other than plot's
own figure is not replaced unless -f is given.
`

// Figure geometry: a strip naming the runs above a grid of panels, at most maxCols wide.
const (
	panelW, panelH = 4.6 * vg.Inch, 3.2 * vg.Inch
	figDPI         = 100
	maxCols        = 4
	maxLabelKeys   = 4 // settings named in a run's label; more are counted ("+2 more")
)

// runPalette is matplotlib's tab10: distinct, familiar from other training dashboards.
var runPalette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff},
	{0xd6, 0x27, 0x28, 0xff}, {0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff},
	{0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff}, {0xbc, 0xbd, 0x22, 0xff},
	{0x17, 0xbe, 0xcf, 0xff},
}

func runColor(i int) color.RGBA { return runPalette[i%len(runPalette)] }

// metricPoint is one logged value of a metric.
type metricPoint struct {
	step int
	v    float64
}

// plotRun is one run directory's metrics: metric name → finite points in step order.
type plotRun struct {
	name   string
	series map[string][]metricPoint
}

// runPlot implements `rookscript plot`; exit codes follow run's: 0 ok, 1 error, 2 usage.
func runPlot(args []string, stdout, stderr io.Writer) int {
	args, out, force, help, err := parsePlotArgs(args)
	if help {
		fmt.Fprint(stdout, plotUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "rookscript plot: %v\n\n%s", err, plotUsage)
		return 2
	}
	// A shell glob such as runs/ablate/* also matches an earlier compare.png: an argument
	// that is not a run is passed over with a note; only having no run left is an error (2).
	var dirs []string
	for _, a := range args {
		if why := notARun(a); why != "" {
			fmt.Fprintf(stderr, "rookscript plot: skipping %s: %s\n", a, why)
			continue
		}
		dirs = append(dirs, a)
	}
	if len(dirs) == 0 {
		fmt.Fprintln(stderr, "rookscript plot: no run to plot: no argument is a run directory with a metrics.jsonl")
		return 2
	}
	own := out == "" // the default output: plot's own figure
	if out == "" {
		out = filepath.Join(filepath.Dir(filepath.Clean(dirs[0])), "compare.png")
		if len(dirs) == 1 {
			out = filepath.Join(dirs[0], "metrics.png")
		}
	}
	// A run's metrics.png is its own; a compare.png is redrawn when plot drew it.
	if _, err := os.Stat(out); err == nil && !force && !(own && (len(dirs) == 1 || plotWrote(out))) {
		fmt.Fprintf(stderr, "rookscript plot: %s already exists; pass -f to replace it, or -o to write elsewhere\n", out)
		return 2
	}
	// A log that exists but cannot be read or parsed is bad data (1).
	names := runLabels(dirs)
	runs := make([]plotRun, len(dirs))
	for i, d := range dirs {
		series, err := readMetricsFile(filepath.Join(d, "metrics.jsonl"), stderr)
		if err != nil {
			fmt.Fprintf(stderr, "rookscript plot: %v\n", err)
			return 1
		}
		runs[i] = plotRun{name: names[i], series: series}
	}
	if err := writePlot(runs, out); err != nil {
		fmt.Fprintf(stderr, "rookscript plot: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, out)
	return 0
}

// notARun says why path is not a run directory to plot, or returns "" when it is one: a
// directory holding metrics.jsonl. Only absence counts; a log that cannot be read is an
// error later, not a reason to skip the run.
func notARun(path string) string {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "it does not exist"
	case err == nil && !fi.IsDir():
		return "not a directory"
	}
	if _, err := os.Stat(filepath.Join(path, "metrics.jsonl")); errors.Is(err, fs.ErrNotExist) {
		return "no metrics.jsonl in it (not a run directory, or no step logged yet)"
	}
	return ""
}

func parsePlotArgs(args []string) (dirs []string, out string, force, help bool, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-h" || a == "--help" || a == "-help":
			return nil, "", false, true, nil
		case a == "-f" || a == "--force":
			force = true
		case a == "-o" || a == "--output":
			if i+1 >= len(args) {
				return nil, "", false, false, fmt.Errorf("%s needs a file name", a)
			}
			i++
			out = args[i]
		case strings.HasPrefix(a, "-o="), strings.HasPrefix(a, "--output="):
			out = a[strings.IndexByte(a, '=')+1:]
		case a == "--":
			dirs = append(dirs, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "-") && a != "-":
			return nil, "", false, false, fmt.Errorf("unknown flag %s", a)
		default:
			dirs = append(dirs, a)
		}
	}
	if len(dirs) == 0 {
		return nil, "", false, false, errors.New("no run directory given")
	}
	if out != "" && !strings.EqualFold(filepath.Ext(out), ".png") {
		return nil, "", false, false, fmt.Errorf("output %q: only PNG is written (want a .png name)", out)
	}
	return dirs, out, force, false, nil
}

// runLabels names each run by the settings in which the runs' config.json files differ, in
// key order ("adamw.lr=1e-4, grpo.beta=0"): what an ablation varied. A run with no readable
// config.json, or whose label would be empty or another run's too, keeps its directory's
// name (runNames); a run plotted alone, its path. run_dir always differs and says nothing,
// so it is left out.
func runLabels(dirs []string) []string {
	if len(dirs) == 1 { // alone, a run is named by its path: "02" alone says little
		return []string{filepath.Clean(dirs[0])}
	}
	names := runNames(dirs)
	cfgs := make([]map[string]string, len(dirs))
	var have []map[string]string
	for i, d := range dirs {
		cfgs[i] = readFlatConfig(filepath.Join(d, "config.json"))
		if cfgs[i] != nil {
			have = append(have, cfgs[i])
		}
	}
	if len(have) < 2 {
		return names
	}
	var keys []string // the settings whose value (or presence) differs between the configs
	for _, c := range have {
		for k, v := range c {
			if k == "run_dir" || slices.Contains(keys, k) {
				continue
			}
			for _, o := range have {
				if w, ok := o[k]; !ok || w != v {
					keys = append(keys, k)
					break
				}
			}
		}
	}
	slices.Sort(keys)
	labels := make([]string, len(dirs))
	count := map[string]int{}
	for i, c := range cfgs {
		var parts []string
		for _, k := range keys {
			if v, ok := c[k]; ok {
				parts = append(parts, k+"="+v)
			}
		}
		if len(parts) > maxLabelKeys {
			parts = append(parts[:maxLabelKeys], fmt.Sprintf("+%d more", len(parts)-maxLabelKeys))
		}
		labels[i] = strings.Join(parts, ", ")
		count[labels[i]]++
	}
	for i, l := range labels {
		if l != "" && count[l] == 1 {
			names[i] = l
		}
	}
	return names
}

// readFlatConfig reads a run's config.json as dotted keys (grpo.beta) → the value as a label
// shows it; nil when the file is missing or not a JSON object.
func readFlatConfig(path string) map[string]string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil
	}
	flat := map[string]string{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
				continue
			}
			flat[prefix+k] = configValue(v)
		}
	}
	walk("", raw)
	return flat
}

// configValue writes a setting compactly: numbers as short as they are exact (1e-4, 0.05),
// lists as [a, b].
func configValue(v any) string {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		return shortNumber(f)
	case string:
		if x == "" {
			return `""`
		}
		return x
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = configValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// shortNumber is the shorter of f's plain and exponent forms: 0.05, 1e-4, 3e+6.
func shortNumber(f float64) string {
	plain, e := strconv.FormatFloat(f, 'f', -1, 64), expNumber(f)
	if len(e) < len(plain) {
		return e
	}
	return plain
}

// expNumber writes f in exponent form without the exponent's leading zeros: 1e-4, not 1e-04.
func expNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	i := strings.IndexByte(e, 'e')
	return e[:i+2] + strings.TrimLeft(e[i+2:], "0")
}

// runNames labels runs by base name, adding the parent where two runs share one (a/seed1
// and b/seed1 from two sweeps).
func runNames(dirs []string) []string {
	base := func(d string) string { return filepath.Base(filepath.Clean(d)) }
	count := map[string]int{}
	for _, d := range dirs {
		count[base(d)]++
	}
	names := make([]string, len(dirs))
	for i, d := range dirs {
		names[i] = base(d)
		if count[names[i]] > 1 {
			c := filepath.Clean(d)
			names[i] = filepath.Join(filepath.Base(filepath.Dir(c)), filepath.Base(c))
		}
	}
	return names
}

// readMetricsFile reads a run's metrics.jsonl into series of finite values in step order.
// An invalid last line is what a crash leaves: skipped with a warning. So is a truncated
// line further up, which is that same torn line after a resumed run ended it with a newline
// and appended after it (engine/checkpoint). Any other invalid line is an error. When a
// step appears twice (steps replayed after a resume), the later value wins.
func readMetricsFile(path string, warn io.Writer) (map[string][]metricPoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	last := -1
	for i, ln := range lines {
		if len(bytes.TrimSpace(ln)) > 0 {
			last = i
		}
	}
	byStep := map[string]map[int]float64{}
	for i, ln := range lines {
		text := bytes.TrimSpace(ln)
		if len(text) == 0 {
			continue
		}
		step, vals, err := parseMetricsRecord(text)
		switch {
		case err == nil:
		case i == last:
			fmt.Fprintf(warn, "rookscript plot: warning: %s:%d: skipped the invalid last line (torn by a crash?): %v\n", path, i+1, err)
			continue
		case errors.Is(err, io.ErrUnexpectedEOF):
			fmt.Fprintf(warn, "rookscript plot: warning: %s:%d: skipped a truncated line (torn by a crash, then resumed): %v\n", path, i+1, err)
			continue
		default:
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		for k, v := range vals {
			if byStep[k] == nil {
				byStep[k] = map[int]float64{}
			}
			byStep[k][step] = v
		}
	}
	series := make(map[string][]metricPoint, len(byStep))
	for k, m := range byStep {
		var pts []metricPoint
		for s, v := range m {
			// NaN/±Inf are logged as strings; a plot has no place for them.
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				pts = append(pts, metricPoint{s, v})
			}
		}
		slices.SortFunc(pts, func(a, b metricPoint) int { return a.step - b.step })
		if len(pts) > 0 {
			series[k] = pts
		}
	}
	return series, nil
}

// parseMetricsRecord parses one line as engine/checkpoint writes it: an integer "step", a
// string "time" (ignored) and numbers, or "NaN"/"Infinity"/"-Infinity" strings.
func parseMetricsRecord(text []byte) (int, map[string]float64, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return 0, nil, err
	}
	if dec.More() {
		return 0, nil, errors.New("trailing data after the object")
	}
	n, ok := raw["step"].(json.Number)
	if !ok {
		return 0, nil, errors.New("no numeric step")
	}
	step, err := n.Int64()
	if err != nil {
		return 0, nil, fmt.Errorf("step %v is not an integer", n)
	}
	vals := make(map[string]float64, len(raw))
	for k, v := range raw {
		if k == "step" || k == "time" {
			continue
		}
		var f float64
		switch x := v.(type) {
		case json.Number:
			f, err = strconv.ParseFloat(string(x), 64)
		case string:
			switch x {
			case "NaN":
				f = math.NaN()
			case "Infinity":
				f = math.Inf(1)
			case "-Infinity":
				f = math.Inf(-1)
			default:
				err = errors.New("not a number")
			}
		default:
			err = errors.New("not a number")
		}
		if err != nil {
			return 0, nil, fmt.Errorf("metric %q: %v is not a number", k, v)
		}
		vals[k] = f
	}
	return int(step), vals, nil
}

// figure is what plot draws, decided before anything is drawn: the runs (their order is
// their colour), the panels in grid order and the step range every panel shares.
type figure struct {
	runs       []plotRun
	panels     []figPanel
	cols, rows int
	steps      [2]float64
}

// figPanel is one panel of the grid.
type figPanel struct {
	title   string
	share   bool     // every metric is a fraction: the y axis is [0, 1]
	metrics []string // the metrics some run logged, in key order; the key names them when several
	band    string   // the std of metrics[0], drawn as a mean ± std band under it; or ""
	trim    string   // the prefix the key leaves off metric names
}

// panelDef is a panel drawn when any run logged one of its metrics.
type panelDef struct {
	title   string
	share   bool
	metrics []string // by name, in this order
	under   string   // then every metric under this prefix (sorted) no earlier panel drew
	band    string
	trim    string
}

// panelDefs are the panels in grid order. Values of different units never share an axis: a
// count (eval/p_count ≈ 128) on the shares' axis flattens every share to 0, and kl/max (up
// to kl_clamp) on kl's flattens the mean. Counts are left out; the eval panels' titles give
// n. Eval metrics are sparse (every eval_every steps) and drawn with glyphs.
var panelDefs = []panelDef{
	{title: "reward (mean ± std)", metrics: []string{"reward", "eval/reward_mean"}, band: "reward_std"},
	{title: "loss", metrics: []string{"loss", "pg_loss"}},
	{title: "KL (kl)", metrics: []string{"kl"}},
	{title: "KL, per-token max", metrics: []string{"kl/max", "kl/first_max"}, under: "kl/"},
	{title: "learning rate (lr)", metrics: []string{"lr"}},
	{title: "entropy", metrics: []string{"entropy"}},
	{title: "gradient norm (grad_norm)", metrics: []string{"grad_norm"}},
	{title: "tokens/s (tokens_per_sec)", metrics: []string{"tokens_per_sec"}},
	{title: "clip ratios (clip_ratio/*)", share: true, trim: "clip_ratio/",
		metrics: []string{"clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"}},
	{title: "batch shares", share: true,
		metrics: []string{"completions/clipped_ratio", "frac_reward_zero_std", "no_signal/P", "no_signal/A", "kl/clamped_ratio",
			"entropy_mask/fraction"}},
	{title: "dynamic sampling: draws a step", metrics: []string{"dynamic/draws"}},
	{title: "dynamic sampling: groups", metrics: []string{"dynamic/groups_drawn", "dynamic/groups_dropped", "dynamic/groups_kept"},
		trim: "dynamic/"},
	{title: "eval: P: shares", share: true, under: "eval/p_", trim: "eval/"},
	{title: "eval: A: shares", share: true, under: "eval/a_", trim: "eval/"},
	{title: "eval: other", under: "eval/", trim: "eval/"},
}

// buildFigure lays out the panels for runs: each panel of panelDefs that some run has a
// metric for, in a grid at most maxCols wide.
func buildFigure(runs []plotRun) figure {
	present := map[string]bool{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range runs {
		for m, pts := range r.series {
			present[m] = true
			lo = math.Min(lo, float64(pts[0].step))
			hi = math.Max(hi, float64(pts[len(pts)-1].step))
		}
	}
	var under []string // every metric, sorted, for the prefix matches
	for m := range present {
		under = append(under, m)
	}
	slices.Sort(under)

	named := map[string]bool{} // a metric a panel names goes there, not under another's prefix
	for _, d := range panelDefs {
		for _, m := range d.metrics {
			named[m] = true
		}
	}
	drawn := map[string]bool{}
	fig := figure{runs: runs, steps: [2]float64{lo, hi}}
	for _, d := range panelDefs {
		var ms []string
		for _, m := range d.metrics {
			if present[m] && !drawn[m] {
				ms = append(ms, m)
			}
		}
		for _, m := range under {
			if d.under == "" || !strings.HasPrefix(m, d.under) || drawn[m] || named[m] {
				continue
			}
			if isCount(m) || d.share && !isShare(runs, m) {
				continue
			}
			ms = append(ms, m)
		}
		if len(ms) == 0 {
			continue
		}
		for _, m := range ms {
			drawn[m] = true
		}
		title := d.title
		if d.under != "" {
			if n, ok := lastCount(runs, d.under+"count"); ok {
				title += fmt.Sprintf(" (n = %g)", n)
			}
		}
		fig.panels = append(fig.panels, figPanel{title: title, share: d.share, metrics: ms, band: d.band, trim: d.trim})
	}
	n := len(fig.panels)
	switch {
	case n <= 3:
		fig.cols = max(n, 1)
	case n == 4:
		fig.cols = 2
	case n == 5 || n == 6 || n == 9:
		fig.cols = 3
	default:
		fig.cols = maxCols
	}
	fig.rows = max((n+fig.cols-1)/fig.cols, 1)
	return fig
}

// isCount reports a metric that counts items (eval/p_count): not a share, not plotted.
func isCount(metric string) bool { return strings.HasSuffix(metric, "_count") }

// isShare reports whether every value any run logged for metric lies in [0, 1].
func isShare(runs []plotRun, metric string) bool {
	for _, r := range runs {
		for _, pt := range r.series[metric] {
			if pt.v < 0 || pt.v > 1 {
				return false
			}
		}
	}
	return true
}

// lastCount is the last logged value of a count metric when every run that logged it ends
// on the same value.
func lastCount(runs []plotRun, metric string) (float64, bool) {
	n, ok := 0.0, false
	for _, r := range runs {
		pts := r.series[metric]
		if len(pts) == 0 {
			continue
		}
		if v := pts[len(pts)-1].v; ok && v != n {
			return 0, false
		} else {
			n, ok = v, true
		}
	}
	return n, ok
}

// seriesStyle is how metric j of a panel is drawn for run i. With one run, colour tells the
// metrics apart; with several, colour is the run and the dash (and glyph) is the metric.
func seriesStyle(fig figure, i, j int, metric string) (draw.LineStyle, draw.GlyphDrawer) {
	ls := draw.LineStyle{Color: runColor(i), Width: vg.Points(1.5), Dashes: plotutil.Dashes(j)}
	if len(fig.runs) == 1 {
		ls.Color, ls.Dashes = runColor(j), nil
	}
	var glyph draw.GlyphDrawer
	if strings.HasPrefix(metric, "eval/") {
		glyph = plotutil.Shape(j)
	}
	return ls, glyph
}

// keyEntry is one metric in a panel's key.
type keyEntry struct {
	label string
	line  draw.LineStyle
	glyph draw.GlyphDrawer // or nil
}

// panelKey is the key of a panel with several metrics; nil for one metric. With several
// runs its samples are grey: each stands for the metric in every run's colour.
func panelKey(fig figure, fp figPanel) []keyEntry {
	if len(fp.metrics) < 2 {
		return nil
	}
	key := make([]keyEntry, len(fp.metrics))
	for j, m := range fp.metrics {
		ls, glyph := seriesStyle(fig, 0, j, m)
		if len(fig.runs) > 1 {
			ls.Color = color.Gray{0x40}
		}
		key[j] = keyEntry{label: strings.TrimPrefix(m, fp.trim), line: ls, glyph: glyph}
	}
	return key
}

// newPanelPlot draws a panel's series into a plot: bands first, so every line lies over
// every band, grid lines under both.
func newPanelPlot(fig figure, fp figPanel) *plot.Plot {
	p := plot.New()
	p.X.Tick.Marker = readableTicks{integer: true}
	p.Y.Tick.Marker = readableTicks{}
	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{0xe0}
	grid.Horizontal.Color = color.Gray{0xe0}
	p.Add(grid)
	for i, r := range fig.runs {
		if fp.band == "" {
			break
		}
		if band := stdBand(r.series[fp.metrics[0]], r.series[fp.band]); band != nil {
			ls, _ := seriesStyle(fig, i, 0, fp.metrics[0])
			c := color.RGBAModel.Convert(ls.Color).(color.RGBA)
			alpha := uint8(0x40)
			if len(fig.runs) > 1 { // lighter, so that where bands overlap each still shows
				alpha = 0x28
			}
			band.Color = color.NRGBA{c.R, c.G, c.B, alpha}
			band.LineStyle.Width = 0
			p.Add(band)
		}
	}
	for j, m := range fp.metrics {
		for i, r := range fig.runs {
			if pts := r.series[m]; len(pts) > 0 {
				ls, glyph := seriesStyle(fig, i, j, m)
				addSeries(p, pts, ls, glyph)
			}
		}
	}
	p.X.Min, p.X.Max = fig.steps[0], fig.steps[1]
	switch {
	case fp.share:
		p.Y.Min, p.Y.Max = 0, 1
	case p.Y.Min == p.Y.Max: // a constant: centre it rather than plot.Axis's ±1 (lr = 1e-4)
		pad := math.Abs(p.Y.Min) * 0.1
		if pad == 0 {
			pad = 1
		}
		p.Y.Min, p.Y.Max = p.Y.Min-pad, p.Y.Max+pad
	}
	return p
}

func xys(pts []metricPoint) plotter.XYs {
	out := make(plotter.XYs, len(pts))
	for i, pt := range pts {
		out[i].X, out[i].Y = float64(pt.step), pt.v
	}
	return out
}

// addSeries draws pts as a line; a lone point gets a glyph so it is not invisible.
func addSeries(p *plot.Plot, pts []metricPoint, ls draw.LineStyle, glyph draw.GlyphDrawer) {
	line, points, err := plotter.NewLinePoints(xys(pts))
	if err != nil { // only for non-finite values, which readMetricsFile drops
		return
	}
	line.LineStyle = ls
	p.Add(line)
	if glyph != nil || len(pts) == 1 {
		if glyph == nil {
			glyph = draw.CircleGlyph{}
		}
		points.Color, points.Shape, points.Radius = ls.Color, glyph, vg.Points(2.5)
		p.Add(points)
	}
}

// stdBand returns the polygon mean±std over the steps that log both, or nil.
func stdBand(mean, std []metricPoint) *plotter.Polygon {
	sd := make(map[int]float64, len(std))
	for _, pt := range std {
		sd[pt.step] = pt.v
	}
	var upper, lower plotter.XYs
	for _, pt := range mean {
		if s, ok := sd[pt.step]; ok {
			upper = append(upper, plotter.XY{X: float64(pt.step), Y: pt.v + s})
			lower = append(lower, plotter.XY{X: float64(pt.step), Y: pt.v - s})
		}
	}
	if len(upper) < 2 {
		return nil
	}
	slices.Reverse(lower)
	poly, err := plotter.NewPolygon(append(upper, lower...))
	if err != nil {
		return nil
	}
	return poly
}

// readableTicks is plot.DefaultTicks with labels given as many decimals as the tick spacing
// needs: DefaultTicks labels 0.995, 1 and 1.005 all as "1". Steps are integers, so with
// integer set, labels between them are dropped.
type readableTicks struct{ integer bool }

func (rt readableTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	var vals []float64
	for i, t := range ts {
		if t.Label == "" {
			continue
		}
		if rt.integer && t.Value != math.Trunc(t.Value) {
			ts[i].Label = ""
			continue
		}
		vals = append(vals, t.Value)
	}
	if len(vals) < 2 {
		return ts
	}
	// The fewest decimals that tell the labelled values apart, exactly as they are.
	tol := (vals[len(vals)-1] - vals[0]) * 1e-9
	dec := 0
	for ; dec < 12; dec++ {
		exact := true
		for _, v := range vals {
			p := math.Pow(10, float64(dec))
			if math.Abs(math.Round(v*p)/p-v) > tol {
				exact = false
				break
			}
		}
		if exact {
			break
		}
	}
	for i, t := range ts {
		if t.Label == "" {
			continue
		}
		p := math.Pow(10, float64(dec))
		v := math.Round(t.Value*p) / p
		if dec > 4 { // 0.0000025 reads better as 2.5e-6; every label alike: 4e-5, 1.6e-4
			ts[i].Label = expNumber(v)
		} else {
			ts[i].Label = strconv.FormatFloat(v, 'f', dec, 64)
		}
	}
	return ts
}

// Text and spacing of the figure's own drawing: the run legend on top, each panel's title
// and key.
var (
	runLegendFont = vg.Points(12)
	keyFont       = vg.Points(9.5)
	keySample     = vg.Points(22) // the length of a key's line sample
	titleGap      = vg.Points(6)  // between a panel's data and its key (or title)
	figTiles      = draw.Tiles{
		PadX: vg.Points(26), PadY: vg.Points(20),
		PadTop: vg.Points(4), PadBottom: vg.Points(8), PadLeft: vg.Points(10), PadRight: vg.Points(20),
	}
)

func textStyle(size vg.Length, xAlign draw.XAlignment) text.Style {
	sty := plot.New().Legend.TextStyle
	sty.Font.Size = size
	sty.XAlign, sty.YAlign = xAlign, draw.YCenter
	return sty
}

// wrapEntries splits entries of the given widths into lines no wider than width, gap apart.
func wrapEntries(widths []vg.Length, gap, width vg.Length) [][]int {
	var lines [][]int
	var used vg.Length
	for i, w := range widths {
		if n := len(lines); n > 0 && used+gap+w <= width {
			lines[n-1] = append(lines[n-1], i)
			used += gap + w
			continue
		}
		lines = append(lines, []int{i})
		used = w
	}
	return lines
}

// writePlot renders the figure and writes it to out atomically, so a failed write never
// leaves a half-written PNG under out's name. The PNG says it is plot's (pngSoftware).
func writePlot(runs []plotRun, out string) error {
	img := drawFigure(buildFigure(runs))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := atomicfile.WriteBytes(out, signPNG(buf.Bytes())); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}

// pngSoftware is the tEXt chunk plot puts in its PNGs, so that a later plot knows a
// compare.png as its own figure to redraw, not someone's file to keep.
var pngSoftware = pngChunk("tEXt", []byte("Software\x00rookscript plot"))

// signPNG inserts pngSoftware after the PNG's header chunk (8-byte signature, then IHDR: 25
// bytes), where readers expect ancillary chunks.
func signPNG(b []byte) []byte {
	const afterIHDR = 8 + 25
	if len(b) < afterIHDR {
		return b
	}
	return slices.Concat(b[:afterIHDR], pngSoftware, b[afterIHDR:])
}

// plotWrote reports whether path is a PNG plot wrote.
func plotWrote(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 33+len(pngSoftware))
	if _, err := io.ReadFull(f, head); err != nil {
		return false
	}
	return bytes.Equal(head[33:], pngSoftware)
}

// pngChunk is one PNG chunk: length, type, data, CRC-32 of type and data.
func pngChunk(typ string, data []byte) []byte {
	b := byteorder.BigEndian.AppendUint32(nil, uint32(len(data)))
	b = append(append(b, typ...), data...)
	return byteorder.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[4:]))
}

// drawFigure draws the run legend, then the panels on a grid whose data areas all have one
// size (plot.Align). Each panel's title and key are drawn in a strip above its data, which
// the plot keeps free with a blank title of the strip's height.
func drawFigure(fig figure) *vgimg.Canvas {
	w := panelW * vg.Length(fig.cols)
	legendSty := textStyle(runLegendFont, draw.XLeft)
	widths := make([]vg.Length, len(fig.runs))
	for i, r := range fig.runs {
		widths[i] = legendSty.Width(r.name)
		if len(fig.runs) > 1 { // one run has no swatch: its colours tell metrics apart
			widths[i] += keySample + vg.Points(6)
		}
	}
	runLines := wrapEntries(widths, vg.Points(24), w-vg.Points(40))
	lineH := legendSty.Height("Xg") * 1.4
	headerH := vg.Points(10) + lineH*vg.Length(len(runLines))
	h := headerH + panelH*vg.Length(fig.rows)

	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(figDPI), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	for l, line := range runLines {
		var total vg.Length
		for k, i := range line {
			if k > 0 {
				total += vg.Points(24)
			}
			total += widths[i]
		}
		x, y := dc.Center().X-total/2, dc.Max.Y-vg.Points(8)-lineH*(vg.Length(l)+0.5)
		for _, i := range line {
			if len(fig.runs) > 1 {
				dc.StrokeLine2(draw.LineStyle{Color: runColor(i), Width: vg.Points(3)}, x, y, x+keySample, y)
				x += keySample + vg.Points(6)
			}
			dc.FillText(legendSty, vg.Point{X: x, Y: y}, fig.runs[i].name)
			x += legendSty.Width(fig.runs[i].name) + vg.Points(24)
		}
	}

	body := dc
	body.Max.Y -= headerH
	if len(fig.panels) == 0 {
		sty := textStyle(vg.Points(14), draw.XCenter)
		sty.Color = color.Gray{0x80}
		body.FillText(sty, body.Center(), "no metrics logged yet")
		return img
	}
	tiles := figTiles
	tiles.Rows, tiles.Cols = fig.rows, fig.cols
	tileW := (w - tiles.PadLeft - tiles.PadRight - tiles.PadX*vg.Length(fig.cols-1)) / vg.Length(fig.cols)
	keySty := textStyle(keyFont, draw.XLeft)
	keyLineH := keySty.Height("Xg") * 1.35

	grid := make([][]*plot.Plot, fig.rows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, fig.cols)
	}
	keyLines := make([][][]int, len(fig.panels))
	keys := make([][]keyEntry, len(fig.panels))
	for k, fp := range fig.panels {
		p := newPanelPlot(fig, fp)
		keys[k] = panelKey(fig, fp)
		kw := make([]vg.Length, len(keys[k]))
		for j, e := range keys[k] {
			kw[j] = keySample + vg.Points(4) + keySty.Width(e.label)
		}
		keyLines[k] = wrapEntries(kw, vg.Points(12), tileW-vg.Points(50)) // less the y axis
		// Only a panel with nothing below it labels its x axis.
		if k+fig.cols >= len(fig.panels) {
			p.X.Label.Text = "step"
		}
		grid[k/fig.cols][k%fig.cols] = p
	}
	// One strip height per row, for the longest key in it, so that titles line up.
	strip := make([]vg.Length, fig.rows)
	for k := range fig.panels {
		strip[k/fig.cols] = max(strip[k/fig.cols], keyLineH*vg.Length(len(keyLines[k])))
	}
	for k := range fig.panels {
		p := grid[k/fig.cols][k%fig.cols]
		p.Title.Text = " "
		p.Title.Padding = titleGap + strip[k/fig.cols] + vg.Points(2)
	}
	cells := plot.Align(grid, tiles, body)
	for k, fp := range fig.panels {
		p, c := grid[k/fig.cols][k%fig.cols], cells[k/fig.cols][k%fig.cols]
		p.Draw(c)
		data := p.DataCanvas(c)
		titleSty := p.Title.TextStyle
		titleSty.YAlign = draw.YBottom
		bottom := data.Max.Y + titleGap + strip[k/fig.cols] + vg.Points(2)
		c.FillText(titleSty, vg.Point{X: (data.Min.X + data.Max.X) / 2, Y: bottom}, fp.title)
		y := bottom - vg.Points(2) - keyLineH/2
		for _, line := range keyLines[k] {
			x := data.Min.X
			for _, j := range line {
				e := keys[k][j]
				c.StrokeLine2(e.line, x, y, x+keySample, y)
				if e.glyph != nil {
					c.DrawGlyph(draw.GlyphStyle{Color: e.line.Color, Radius: vg.Points(2.5), Shape: e.glyph},
						vg.Point{X: x + keySample/2, Y: y})
				}
				x += keySample + vg.Points(4)
				c.FillText(keySty, vg.Point{X: x, Y: y}, e.label)
				x += keySty.Width(e.label) + vg.Points(12)
			}
			y -= keyLineH
		}
	}
	return img
}
