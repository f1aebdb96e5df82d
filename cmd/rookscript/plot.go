package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

const plotUsage = `Usage: rookscript plot RUN_DIR [RUN_DIR ...] [-o OUT.png] [-f]

Writes one PNG of the runs' metrics.jsonl over steps: reward (mean ± std), KL, ratio mean,
clip fraction, gradient norm and the eval/* metrics. Several runs overlay, one colour each,
named by their directory's base name. Reading a run needs no lock: a running run can be
plotted.

Output: RUN_DIR/metrics.png for one run (the run's own figure, redrawn each time);
compare.png beside the first run directory for several; or -o OUT.png. An existing file
other than a run's own metrics.png is not replaced unless -f is given.
`

// Figure geometry: a legend strip naming the runs above a 3×2 grid of panels.
const (
	figW, figH = 15 * vg.Inch, 8.5 * vg.Inch
	figDPI     = 100
	headerH    = 0.45 * vg.Inch
	gridCols   = 3
	gridRows   = 2
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
	dirs, out, force, help, err := parsePlotArgs(args)
	if help {
		fmt.Fprint(stdout, plotUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "rookscript plot: %v\n\n%s", err, plotUsage)
		return 2
	}
	own := out == "" && len(dirs) == 1 // the run's own metrics.png, replaced without -f
	if out == "" {
		out = filepath.Join(filepath.Dir(filepath.Clean(dirs[0])), "compare.png")
		if own {
			out = filepath.Join(dirs[0], "metrics.png")
		}
	}
	if _, err := os.Stat(out); err == nil && !own && !force {
		fmt.Fprintf(stderr, "rookscript plot: %s already exists; pass -f to replace it, or -o to write elsewhere\n", out)
		return 2
	}
	// A directory that is missing or holds no metrics.jsonl is a wrong argument (2); a log
	// that exists but cannot be read or parsed is bad data (1).
	paths := make([]string, len(dirs))
	for i, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			fmt.Fprintf(stderr, "rookscript plot: run directory %s does not exist\n", d)
			return 2
		}
		paths[i] = filepath.Join(d, "metrics.jsonl")
		if _, err := os.Stat(paths[i]); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "rookscript plot: %s does not exist (not a run directory, or no step logged yet)\n", paths[i])
			return 2
		}
	}
	names := runNames(dirs)
	runs := make([]plotRun, len(dirs))
	for i, p := range paths {
		series, err := readMetricsFile(p, stderr)
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

// panel is one cell of the grid; hasData is false when it shows "no data".
type panel struct {
	title   string
	plot    *plot.Plot
	hasData bool
}

// buildPanels lays out the fixed panels. Ratio mean (≈1) and clip fraction (≈0) get a
// panel each: on one axis, either one's movement would be flattened by the other's offset.
func buildPanels(runs []plotRun) []panel {
	return []panel{
		rewardPanel(runs),
		metricPanel(runs, "KL", "kl"),
		metricPanel(runs, "ratio mean", "ratio/mean"),
		metricPanel(runs, "clip fraction", "clip_ratio/region_mean"),
		metricPanel(runs, "gradient norm", "grad_norm"),
		evalPanel(runs),
	}
}

// newPanel starts a panel: grid lines first so they lie under the data, or, when no run
// has data for it, a "no data" note in place of axes.
func newPanel(title string, hasData bool) panel {
	p := plot.New()
	p.Title.Text = title
	if !hasData {
		p.HideAxes()
		p.Add(noData{})
	} else {
		p.X.Label.Text = "step"
		p.X.Tick.Marker = readableTicks{integer: true}
		p.Y.Tick.Marker = readableTicks{}
		grid := plotter.NewGrid()
		grid.Vertical.Color = color.Gray{0xe0}
		grid.Horizontal.Color = color.Gray{0xe0}
		p.Add(grid)
	}
	return panel{title: title, plot: p, hasData: hasData}
}

// hasSeries reports whether any run logged metric.
func hasSeries(runs []plotRun, metric string) bool {
	return slices.ContainsFunc(runs, func(r plotRun) bool { return len(r.series[metric]) > 0 })
}

func xys(pts []metricPoint) plotter.XYs {
	out := make(plotter.XYs, len(pts))
	for i, pt := range pts {
		out[i].X, out[i].Y = float64(pt.step), pt.v
	}
	return out
}

// addSeries draws pts as a line in clr; a lone point gets a glyph so it is not invisible.
func addSeries(p *plot.Plot, pts []metricPoint, clr color.Color, dashes []vg.Length, glyph draw.GlyphDrawer) {
	line, points, err := plotter.NewLinePoints(xys(pts))
	if err != nil { // only for non-finite values, which readMetricsFile drops
		return
	}
	line.Color, line.Width, line.Dashes = clr, vg.Points(1.5), dashes
	p.Add(line)
	if glyph != nil || len(pts) == 1 {
		if glyph == nil {
			glyph = draw.CircleGlyph{}
		}
		points.Color, points.Shape, points.Radius = clr, glyph, vg.Points(2.5)
		p.Add(points)
	}
}

func metricPanel(runs []plotRun, title, metric string) panel {
	pn := newPanel(title, hasSeries(runs, metric))
	for i, r := range runs {
		if pts := r.series[metric]; len(pts) > 0 {
			addSeries(pn.plot, pts, runColor(i), nil, nil)
		}
	}
	return pn
}

func rewardPanel(runs []plotRun) panel {
	pn := newPanel("reward (mean ± std)", hasSeries(runs, "reward"))
	p := pn.plot
	// Bands first, so every run's mean line is drawn over every band.
	for i, r := range runs {
		if band := stdBand(r.series["reward"], r.series["reward_std"]); band != nil {
			c := runColor(i)
			band.Color = color.NRGBA{c.R, c.G, c.B, 0x40}
			band.LineStyle.Width = 0
			p.Add(band)
		}
	}
	for i, r := range runs {
		if pts := r.series["reward"]; len(pts) > 0 {
			addSeries(p, pts, runColor(i), nil, nil)
		}
	}
	return pn
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

// evalPanel overlays every eval/* metric: colour says which run, dash and glyph say which
// metric, listed in the panel's own legend.
func evalPanel(runs []plotRun) panel {
	var metrics []string
	for _, r := range runs {
		for k := range r.series {
			if strings.HasPrefix(k, "eval/") && !slices.Contains(metrics, k) {
				metrics = append(metrics, k)
			}
		}
	}
	slices.Sort(metrics)
	pn := newPanel("evaluation (eval/*)", len(metrics) > 0)
	p := pn.plot
	for j, m := range metrics {
		for i, r := range runs {
			if pts := r.series[m]; len(pts) > 0 {
				addSeries(p, pts, runColor(i), plotutil.Dashes(j), plotutil.Shape(j))
			}
		}
		// The legend key is drawn in grey: it stands for the metric in every run's colour.
		key, glyph, _ := plotter.NewLinePoints(plotter.XYs{{}})
		key.Color, key.Width, key.Dashes = color.Gray{0x40}, vg.Points(1.5), plotutil.Dashes(j)
		glyph.Color, glyph.Shape, glyph.Radius = color.Gray{0x40}, plotutil.Shape(j), vg.Points(2.5)
		p.Legend.Add(strings.TrimPrefix(m, "eval/"), key, glyph)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.ThumbnailWidth = vg.Points(24)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	p.Legend.XOffs = vg.Points(6)
	// Headroom above the data so the legend does not cover it.
	span := p.Y.Max - p.Y.Min
	if span == 0 {
		span = math.Max(math.Abs(p.Y.Max), 1)
	}
	if len(metrics) > 0 {
		p.Y.Max += span * 0.09 * float64(len(metrics))
	}
	return pn
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
		if dec > 4 { // 0.0000025 reads better as 2.5e-06
			ts[i].Label = strconv.FormatFloat(v, 'g', -1, 64)
		} else {
			ts[i].Label = strconv.FormatFloat(v, 'f', dec, 64)
		}
	}
	return ts
}

// noData writes "no data" in the middle of an empty panel.
type noData struct{}

func (noData) Plot(c draw.Canvas, p *plot.Plot) {
	sty := p.Title.TextStyle
	sty.Color = color.Gray{0x80}
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
	c.FillText(sty, c.Center(), "no data")
}

// writePlot renders the figure and writes it to out through a temporary file, so a failed
// write never leaves a half-written PNG under out's name.
func writePlot(runs []plotRun, out string) error {
	img := vgimg.NewWith(vgimg.UseWH(figW, figH), vgimg.UseDPI(figDPI), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)

	header := dc
	header.Min.Y = dc.Max.Y - headerH
	drawRunLegend(header, runs)

	body := dc
	body.Max.Y -= headerH
	panels := buildPanels(runs)
	grid := make([][]*plot.Plot, gridRows)
	for r := range grid {
		grid[r] = make([]*plot.Plot, gridCols)
		for c := range grid[r] {
			grid[r][c] = panels[r*gridCols+c].plot
		}
	}
	tiles := draw.Tiles{
		Rows: gridRows, Cols: gridCols,
		PadX: vg.Points(24), PadY: vg.Points(24),
		PadTop: vg.Points(6), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(18),
	}
	cells := plot.Align(grid, tiles, body)
	for r := range grid {
		for c := range grid[r] {
			grid[r][c].Draw(cells[r][c])
		}
	}

	tmp, err := os.CreateTemp(filepath.Dir(out), ".plot-*.png")
	if err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	return nil
}

// drawRunLegend draws one colour swatch and name per run, in a centred row.
func drawRunLegend(c draw.Canvas, runs []plotRun) {
	sty := plot.New().Legend.TextStyle
	sty.Font.Size = vg.Points(12)
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
	swatch, gap, pad := vg.Points(22), vg.Points(6), vg.Points(22)
	var total vg.Length
	for i, r := range runs {
		if i > 0 {
			total += pad
		}
		total += swatch + gap + sty.Width(r.name)
	}
	x := c.Center().X - total/2
	y := c.Center().Y
	for i, r := range runs {
		ls := draw.LineStyle{Color: runColor(i), Width: vg.Points(3)}
		c.StrokeLine2(ls, x, y, x+swatch, y)
		x += swatch + gap
		c.FillText(sty, vg.Point{X: x, Y: y}, r.name)
		x += sty.Width(r.name) + pad
	}
}
