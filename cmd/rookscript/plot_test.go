package main

import (
	"bytes"
	"fmt"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// metricsLines returns n training steps, with an eval line every 5 steps when withEval, under
// the names a run logs (see a real run's metrics.jsonl).
func metricsLines(n int, withEval bool, scale float64) []string {
	var ls []string
	for s := 1; s <= n; s++ {
		f := float64(s) / float64(n)
		ls = append(ls, fmt.Sprintf(`{"step":%d,"time":"2026-01-01T00:00:00.000Z","reward":%g,"reward_std":0.2,"kl":%g,"kl/max":%g,"kl/clamped_ratio":0,`+
			`"ratio/mean":%g,"clip_ratio/region_mean":%g,"clip_ratio/low_mean":0,"grad_norm":%g,"loss":0.1,"pg_loss":0.09,"lr":%g,"entropy":%g,`+
			`"tokens_per_sec":%g,"completions/clipped_ratio":%g,"frac_reward_zero_std":0.25}`,
			s, scale*f, 0.001*scale*float64(s), 0.3*scale*float64(s), 1+0.01*float64(s%3), 0.05*float64(s%4), 2-f, 1e-4*min(1, float64(s)/3),
			3-f, 1200+float64(s%5)*10, 0.5*(1-f)))
		if withEval && s%5 == 0 {
			ls = append(ls, fmt.Sprintf(`{"step":%d,"time":"2026-01-01T00:00:00.000Z","eval/p_format":%g,"eval/p_count":128,"eval/a_fen_exact":%g,"eval/a_count":128,"eval/reward_mean":%g}`,
				s, scale*f/2, f/3, 0.5*scale*f))
		}
	}
	return ls
}

func writeRun(t *testing.T, dir string, lines []string, tail string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	body := strings.Join(lines, "\n") + "\n" + tail
	if err := os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkPNG decodes path and checks that it is not blank and that each run's colour is drawn
// in it beyond the run legend's swatch.
func checkPNG(t *testing.T, path string, runs int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	counts := make([]int, runs)
	nonWhite := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			if c != (color.RGBA{0xff, 0xff, 0xff, 0xff}) {
				nonWhite++
			}
			for i := range counts {
				if c == runColor(i) {
					counts[i]++
				}
			}
		}
	}
	if nonWhite < b.Dx()*b.Dy()/100 {
		t.Errorf("%s looks blank: %d non-white pixels", path, nonWhite)
	}
	for i, n := range counts {
		if n < 500 {
			t.Errorf("%s: run %d's colour %v drawn in %d pixels", path, i, runColor(i), n)
		}
	}
}

func TestPlot(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T, root string) []string // returns the arguments
		code     int
		out      string // output path relative to root; "" for none
		runs     int
		stderr   []string // substrings stderr must hold
		noStderr bool
		kept     map[string]string // files (relative to root) that must keep their content
	}{
		{
			name: "one run",
			setup: func(t *testing.T, root string) []string {
				return []string{writeRun(t, filepath.Join(root, "grpo"), metricsLines(40, true, 1), "")}
			},
			out: "grpo/metrics.png", runs: 1, noStderr: true,
		},
		{
			name: "two runs, -o after the directories",
			setup: func(t *testing.T, root string) []string {
				a := writeRun(t, filepath.Join(root, "base"), metricsLines(40, true, 1), "")
				b := writeRun(t, filepath.Join(root, "lr2x"), metricsLines(30, true, 2), "")
				return []string{a, b, "-o", filepath.Join(root, "ab.png")}
			},
			out: "ab.png", runs: 2, noStderr: true,
		},
		{
			name: "two runs, default compare.png beside the first run",
			setup: func(t *testing.T, root string) []string {
				t.Chdir(root)
				writeRun(t, "x/seed1", metricsLines(20, false, 1), "")
				writeRun(t, "y/seed1", metricsLines(20, true, 1.5), "")
				return []string{"x/seed1", "y/seed1"}
			},
			out: "x/compare.png", runs: 2, noStderr: true,
		},
		{
			name: "an existing compare.png is not replaced without -f",
			setup: func(t *testing.T, root string) []string {
				a := writeRun(t, filepath.Join(root, "a"), metricsLines(20, false, 1), "")
				b := writeRun(t, filepath.Join(root, "b"), metricsLines(20, true, 1.5), "")
				mustWrite(t, filepath.Join(root, "compare.png"), "someone's figure")
				return []string{a, b}
			},
			code: 2, stderr: []string{"compare.png already exists; pass -f"},
			kept: map[string]string{"compare.png": "someone's figure"},
		},
		{
			name: "a compare.png plot drew is redrawn without -f",
			setup: func(t *testing.T, root string) []string {
				a := writeRun(t, filepath.Join(root, "a"), metricsLines(20, false, 1), "")
				b := writeRun(t, filepath.Join(root, "b"), metricsLines(20, true, 1.5), "")
				if code := runPlot([]string{a, b}, io.Discard, io.Discard); code != 0 {
					t.Fatalf("first plot: exit %d", code)
				}
				return []string{a, b}
			},
			out: "compare.png", runs: 2, noStderr: true,
		},
		{
			name: "an existing -o file is not replaced without -f",
			setup: func(t *testing.T, root string) []string {
				a := writeRun(t, filepath.Join(root, "a"), metricsLines(20, false, 1), "")
				mustWrite(t, filepath.Join(root, "fig.png"), "keep me")
				return []string{a, "-o", filepath.Join(root, "fig.png")}
			},
			code: 2, stderr: []string{"fig.png already exists"},
			kept: map[string]string{"fig.png": "keep me"},
		},
		{
			name: "-f replaces an existing file",
			setup: func(t *testing.T, root string) []string {
				a := writeRun(t, filepath.Join(root, "a"), metricsLines(20, false, 1), "")
				b := writeRun(t, filepath.Join(root, "b"), metricsLines(20, true, 1.5), "")
				mustWrite(t, filepath.Join(root, "compare.png"), "old")
				return []string{"-f", a, b}
			},
			out: "compare.png", runs: 2, noStderr: true,
		},
		{
			name: "a run's own metrics.png is redrawn",
			setup: func(t *testing.T, root string) []string {
				a := writeRun(t, filepath.Join(root, "a"), metricsLines(20, false, 1), "")
				mustWrite(t, filepath.Join(root, "a", "metrics.png"), "old")
				return []string{a}
			},
			out: "a/metrics.png", runs: 1, noStderr: true,
		},
		{
			name: "torn last line is skipped with a warning",
			setup: func(t *testing.T, root string) []string {
				return []string{writeRun(t, filepath.Join(root, "crashed"), metricsLines(20, true, 1), `{"step":21,"time":"2026-01-0`)}
			},
			out: "crashed/metrics.png", runs: 1, stderr: []string{"warning", "crashed/metrics.jsonl:25:"},
		},
		{
			name: "truncated line a resume ended is skipped with a warning",
			setup: func(t *testing.T, root string) []string {
				ls := metricsLines(20, false, 1)
				ls = append(ls[:10:10], append([]string{`{"step":11,"time":"2026-01-01T00:00:00.000Z","rew`}, ls[10:]...)...)
				return []string{writeRun(t, filepath.Join(root, "resumed"), ls, "")}
			},
			out: "resumed/metrics.png", runs: 1, stderr: []string{"warning", "resumed/metrics.jsonl:11:"},
		},
		{
			name: "invalid line mid-file is an error naming file:line",
			setup: func(t *testing.T, root string) []string {
				ls := metricsLines(10, false, 1)
				ls[2] = `{"step":3,"reward":"high"}`
				return []string{writeRun(t, filepath.Join(root, "bad"), ls, "")}
			},
			code: 1, stderr: []string{"bad/metrics.jsonl:3:", `"reward"`},
		},
		{
			name: "arguments that are not runs are skipped with a note",
			setup: func(t *testing.T, root string) []string {
				// runs/ablate/* after an earlier plot: the runs, the old figure and a stray folder.
				a := writeRun(t, filepath.Join(root, "ablate", "01"), metricsLines(20, true, 1), "")
				b := writeRun(t, filepath.Join(root, "ablate", "02"), metricsLines(20, true, 1.5), "")
				mustWrite(t, filepath.Join(root, "ablate", "compare.png"), "an earlier figure")
				if err := os.Mkdir(filepath.Join(root, "ablate", "notes"), 0o755); err != nil {
					t.Fatal(err)
				}
				return []string{"-f", a, b, filepath.Join(root, "ablate", "compare.png"), filepath.Join(root, "ablate", "notes"), filepath.Join(root, "gone")}
			},
			out: "ablate/compare.png", runs: 2,
			stderr: []string{"skipping " + "ROOT/ablate/compare.png: not a directory", "skipping ROOT/ablate/notes: no metrics.jsonl",
				"skipping ROOT/gone: it does not exist"},
		},
		{
			name: "one run left of several arguments is drawn as that run's own figure",
			setup: func(t *testing.T, root string) []string {
				a := writeRun(t, filepath.Join(root, "a"), metricsLines(20, true, 1), "")
				return []string{a, filepath.Join(root, "a", "metrics.jsonl")}
			},
			out: "a/metrics.png", runs: 1, stderr: []string{"skipping ROOT/a/metrics.jsonl: not a directory"},
		},
		{
			name: "missing directory: no run left",
			setup: func(t *testing.T, root string) []string {
				return []string{filepath.Join(root, "nope")}
			},
			code: 2, stderr: []string{"skipping ROOT/nope: it does not exist", "no run to plot"},
		},
		{
			name: "directory without metrics.jsonl: no run left",
			setup: func(t *testing.T, root string) []string {
				mustWrite(t, filepath.Join(root, "compare.png"), "x")
				return []string{root, filepath.Join(root, "compare.png")}
			},
			code: 2, stderr: []string{"skipping ROOT: no metrics.jsonl", "skipping ROOT/compare.png: not a directory", "no run to plot"},
		},
		{
			name: "run with no eval lines",
			setup: func(t *testing.T, root string) []string {
				return []string{writeRun(t, filepath.Join(root, "noeval"), metricsLines(20, false, 1), "")}
			},
			out: "noeval/metrics.png", runs: 1, noStderr: true,
		},
		{
			name:  "no run directory",
			setup: func(t *testing.T, root string) []string { return []string{"-o", "x.png"} },
			code:  2, stderr: []string{"no run directory"},
		},
		{
			name: "output that is not a PNG",
			setup: func(t *testing.T, root string) []string {
				return []string{writeRun(t, filepath.Join(root, "r"), metricsLines(5, false, 1), ""), "-o", "plot.svg"}
			},
			code: 2, stderr: []string{"want a .png"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			args := tc.setup(t, root)
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"plot"}, args...), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			for _, s := range tc.stderr {
				if s = strings.ReplaceAll(s, "ROOT", root); !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr does not mention %q:\n%s", s, stderr.String())
				}
			}
			for name, want := range tc.kept {
				if b, err := os.ReadFile(filepath.Join(root, name)); err != nil || string(b) != want {
					t.Errorf("%s was replaced (%q, %v)", name, b, err)
				}
			}
			if tc.noStderr && stderr.Len() > 0 {
				t.Errorf("unexpected stderr:\n%s", stderr.String())
			}
			if tc.out == "" {
				if stdout.Len() > 0 {
					t.Errorf("stdout %q on failure", stdout.String())
				}
				return
			}
			printed := strings.TrimSpace(stdout.String())
			if !filepath.IsAbs(printed) {
				printed = filepath.Join(root, printed) // compare.png is relative to the test's cwd
			}
			if want := filepath.Join(root, tc.out); printed != want {
				t.Fatalf("printed %q, want %q", printed, want)
			}
			checkPNG(t, printed, tc.runs)
		})
	}
}

// pts is a series with the given values at steps 1, 2, ...
func pts(vs ...float64) []metricPoint {
	out := make([]metricPoint, len(vs))
	for i, v := range vs {
		out[i] = metricPoint{i + 1, v}
	}
	return out
}

// TestPlotFigure: the figure has a panel for each quantity some run logged and none for the
// rest; shares are on [0, 1] axes that counts never join; the grid fits the panels.
func TestPlotFigure(t *testing.T) {
	train := map[string][]metricPoint{
		"reward": pts(-0.3, 0.1), "reward_std": pts(0.2, 0.3), "loss": pts(0.1, 0.05), "pg_loss": pts(0.1, 0.04),
		"kl": pts(0, 0.01), "kl/max": pts(0, 4), "kl/clamped_ratio": pts(0, 0.001), "lr": pts(1e-4, 2e-4),
		"entropy": pts(3, 2.9), "grad_norm": pts(1, 2), "tokens_per_sec": pts(1200, 1300),
		"clip_ratio/low_mean": pts(0, 0.01), "clip_ratio/high_mean": pts(0, 0.02), "clip_ratio/region_mean": pts(0, 0.03),
		"completions/clipped_ratio": pts(1, 0.5), "frac_reward_zero_std": pts(1, 0.25), "ratio/mean": pts(1, 1),
	}
	eval := map[string][]metricPoint{
		"eval/p_format": pts(0.5, 0.6), "eval/p_legal_best": pts(0.2, 0.3), "eval/p_count": pts(128, 128),
		"eval/a_fen_exact": pts(0.1, 0.4), "eval/a_count": pts(128, 128), "eval/reward_mean": pts(-0.2, 0.1),
		"eval/p_mean_moves": pts(3.5, 4), // not a share: its own panel, not the shares' axis
	}
	type want struct {
		metrics []string
		share   bool
	}
	for _, tc := range []struct {
		name       string
		runs       []plotRun
		panels     map[string]want // title → its metrics and axis; no other panel may exist
		cols, rows int
	}{
		{"nothing logged", []plotRun{{name: "empty", series: map[string][]metricPoint{}}}, map[string]want{}, 1, 1},
		{"training only: every training panel, no eval panel", []plotRun{{name: "a", series: train}}, map[string]want{
			"reward (mean ± std)":        {[]string{"reward"}, false},
			"loss":                       {[]string{"loss", "pg_loss"}, false},
			"KL (kl)":                    {[]string{"kl"}, false},
			"KL, per-token max":          {[]string{"kl/max"}, false},
			"learning rate (lr)":         {[]string{"lr"}, false},
			"entropy":                    {[]string{"entropy"}, false},
			"gradient norm (grad_norm)":  {[]string{"grad_norm"}, false},
			"tokens/s (tokens_per_sec)":  {[]string{"tokens_per_sec"}, false},
			"clip ratios (clip_ratio/*)": {[]string{"clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"}, true},
			"batch shares":               {[]string{"completions/clipped_ratio", "frac_reward_zero_std", "kl/clamped_ratio"}, true},
		}, 4, 3},
		{"eval only: counts left out, n in the titles", []plotRun{{name: "a", series: eval}}, map[string]want{
			"reward (mean ± std)":       {[]string{"eval/reward_mean"}, false},
			"eval: P: shares (n = 128)": {[]string{"eval/p_format", "eval/p_legal_best"}, true},
			"eval: A: shares (n = 128)": {[]string{"eval/a_fen_exact"}, true},
			"eval: other":               {[]string{"eval/p_mean_moves"}, false},
		}, 2, 2},
		{"the signal's panels: no-signal shares, dynamic sampling", []plotRun{{name: "a", series: map[string][]metricPoint{
			"frac_reward_zero_std": pts(0.1), "no_signal/P": pts(0.2), "no_signal/A": pts(0),
			"dynamic/draws": pts(2), "dynamic/groups_dropped": pts(1), "dynamic/groups_kept": pts(8)}}}, map[string]want{
			"batch shares":                   {[]string{"frac_reward_zero_std", "no_signal/P", "no_signal/A"}, true},
			"dynamic sampling: draws a step": {[]string{"dynamic/draws"}, false},
			"dynamic sampling: groups":       {[]string{"dynamic/groups_dropped", "dynamic/groups_kept"}, false},
		}, 3, 1},
		{"a panel some run has", []plotRun{
			{name: "a", series: map[string][]metricPoint{"kl": pts(0.1)}},
			{name: "b", series: map[string][]metricPoint{"grad_norm": pts(1), "eval/a_format": pts(0.5)}},
		}, map[string]want{
			"KL (kl)":                   {[]string{"kl"}, false},
			"gradient norm (grad_norm)": {[]string{"grad_norm"}, false},
			"eval: A: shares":           {[]string{"eval/a_format"}, true},
		}, 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fig := buildFigure(tc.runs)
			if fig.cols != tc.cols || fig.rows != tc.rows {
				t.Errorf("grid %d×%d, want %d×%d", fig.cols, fig.rows, tc.cols, tc.rows)
			}
			if fig.cols*fig.rows < len(fig.panels) || fig.cols > maxCols {
				t.Errorf("%d panels on a %d×%d grid", len(fig.panels), fig.cols, fig.rows)
			}
			got := map[string]bool{}
			for _, fp := range fig.panels {
				got[fp.title] = true
				w, ok := tc.panels[fp.title]
				if !ok {
					t.Errorf("unexpected panel %q %v", fp.title, fp.metrics)
					continue
				}
				if !slices.Equal(fp.metrics, w.metrics) || fp.share != w.share {
					t.Errorf("panel %q: metrics %v share %v, want %v share %v", fp.title, fp.metrics, fp.share, w.metrics, w.share)
				}
				// The drawn axis: [0, 1] for shares, and no count on it.
				p := newPanelPlot(fig, fp)
				if fp.share && (p.Y.Min != 0 || p.Y.Max != 1) {
					t.Errorf("share panel %q: y axis [%g, %g], want [0, 1]", fp.title, p.Y.Min, p.Y.Max)
				}
				for _, m := range fp.metrics {
					if fp.share && (strings.HasSuffix(m, "_count") || !isShare(tc.runs, m)) {
						t.Errorf("share panel %q draws %s", fp.title, m)
					}
				}
			}
			for title := range tc.panels {
				if !got[title] {
					t.Errorf("no panel %q", title)
				}
			}
			if err := writePlot(tc.runs, filepath.Join(t.TempDir(), "p.png")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPlotAxes: a free axis holds its data, with a constant centred rather than spread over
// plot's default ±1 (where lr = 1e-4 would lie on 0); a share's axis is [0, 1] whatever
// its values; every panel shares one step range.
func TestPlotAxes(t *testing.T) {
	runs := []plotRun{
		{name: "a", series: map[string][]metricPoint{"lr": pts(1e-4, 1e-4), "grad_norm": pts(0.5, 3), "clip_ratio/region_mean": pts(0.01, 0.02)}},
		{name: "b", series: map[string][]metricPoint{"eval/p_format": {{0, 0.2}, {40, 0.3}}}},
	}
	fig := buildFigure(runs)
	for _, tc := range []struct {
		title    string
		min, max float64
	}{
		{"learning rate (lr)", 0.9e-4, 1.1e-4},
		{"gradient norm (grad_norm)", 0.5, 3},
		{"clip ratios (clip_ratio/*)", 0, 1},
		{"eval: P: shares", 0, 1},
	} {
		i := slices.IndexFunc(fig.panels, func(fp figPanel) bool { return fp.title == tc.title })
		if i < 0 {
			t.Fatalf("no panel %q", tc.title)
		}
		p := newPanelPlot(fig, fig.panels[i])
		if math.Abs(p.Y.Min-tc.min) > 1e-12 || math.Abs(p.Y.Max-tc.max) > 1e-12 {
			t.Errorf("%s: y axis [%g, %g], want [%g, %g]", tc.title, p.Y.Min, p.Y.Max, tc.min, tc.max)
		}
		if p.X.Min != 0 || p.X.Max != 40 {
			t.Errorf("%s: steps [%g, %g], want [0, 40]", tc.title, p.X.Min, p.X.Max)
		}
	}
}

// TestRunLabels: runs are named by the settings in which their config.json files differ;
// without a difference to show, by their directory's name.
func TestRunLabels(t *testing.T) {
	const base = `{"grpo":{"beta":0.05,"loss_type":"grpo","rank_credit":[1,0.7]},"adamw":{"lr":0.0003},"seed":1,"run_dir":"%s"}`
	for _, tc := range []struct {
		name    string
		configs map[string]string // run directory → config.json ("" for none)
		want    []string          // labels in sorted directory order
	}{
		{"one setting differs", map[string]string{
			"ablate/01": `{"grpo":{"beta":0,"loss_type":"grpo"},"adamw":{"lr":0.0003},"run_dir":"ablate/01"}`,
			"ablate/02": `{"grpo":{"beta":0.02,"loss_type":"grpo"},"adamw":{"lr":0.0003},"run_dir":"ablate/02"}`,
		}, []string{"grpo.beta=0", "grpo.beta=0.02"}},
		{"two differ, nested, in key order, numbers short", map[string]string{
			"ablate/01": `{"grpo":{"beta":0},"adamw":{"lr":0.0001},"run_dir":"a"}`,
			"ablate/02": `{"grpo":{"beta":0.05},"adamw":{"lr":0.00003},"run_dir":"b"}`,
		}, []string{"adamw.lr=1e-4, grpo.beta=0", "adamw.lr=3e-5, grpo.beta=0.05"}},
		{"strings, bools, lists and a key one run lacks", map[string]string{
			"x/a": `{"grpo":{"loss_type":"dapo","trl_compat":true},"reward":{"rank_credit":[1,0.7]}}`,
			"x/b": `{"grpo":{"loss_type":"grpo","trl_compat":false},"reward":{"rank_credit":[1,0.5]},"extra":""}`,
		}, []string{"grpo.loss_type=dapo, grpo.trl_compat=true, reward.rank_credit=[1, 0.7]",
			`extra="", grpo.loss_type=grpo, grpo.trl_compat=false, reward.rank_credit=[1, 0.5]`}},
		{"nothing differs but run_dir: directory names", map[string]string{
			"s/01": fmt.Sprintf(base, "s/01"), "s/02": fmt.Sprintf(base, "s/02"),
		}, []string{"01", "02"}},
		{"a run without config.json keeps its name", map[string]string{
			"r/01": `{"seed":1}`, "r/02": `{"seed":2}`, "r/old": "",
		}, []string{"seed=1", "seed=2", "old"}},
		{"an unreadable config.json counts as none", map[string]string{
			"r/01": `{"seed":1}`, "r/02": `{"seed":`,
		}, []string{"01", "02"}},
		{"two runs with one label keep their names", map[string]string{
			"a/01": `{"seed":1}`, "b/01": `{"seed":1}`, "c/01": `{"seed":2}`,
		}, []string{"a/01", "b/01", "seed=2"}},
		{"many differences: the first few, then a count", map[string]string{
			"m/1": `{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1}`, "m/2": `{"a":2,"b":2,"c":2,"d":2,"e":2,"f":2}`,
		}, []string{"a=1, b=1, c=1, d=1, +2 more", "a=2, b=2, c=2, d=2, +2 more"}},
		{"one run: its path", map[string]string{"solo/run": `{"seed":1}`}, []string{"ROOT/solo/run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			var dirs []string
			for d, cfg := range tc.configs {
				path := filepath.Join(root, d)
				if err := os.MkdirAll(path, 0o755); err != nil {
					t.Fatal(err)
				}
				if cfg != "" {
					mustWrite(t, filepath.Join(path, "config.json"), cfg)
				}
				dirs = append(dirs, path)
			}
			slices.Sort(dirs)
			for i := range tc.want {
				tc.want[i] = strings.ReplaceAll(tc.want[i], "ROOT", root)
			}
			if got := runLabels(dirs); !slices.Equal(got, tc.want) {
				t.Errorf("labels %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReadMetricsFile: steps replayed after a resume keep the later value, non-finite values
// are dropped, and series come back in step order.
func TestReadMetricsFile(t *testing.T) {
	dir := writeRun(t, t.TempDir(), []string{
		`{"step":2,"time":"t","kl":0.2}`,
		`{"step":1,"time":"t","kl":0.1,"grad_norm":"NaN"}`,
		`{"step":2,"time":"t","kl":0.25,"grad_norm":1.5}`,
		`{"step":3,"time":"t","kl":"Infinity"}`,
	}, "")
	var warn bytes.Buffer
	s, err := readMetricsFile(filepath.Join(dir, "metrics.jsonl"), &warn)
	if err != nil || warn.Len() > 0 {
		t.Fatalf("err %v, warnings %q", err, warn.String())
	}
	if got := fmt.Sprint(s["kl"], s["grad_norm"]); got != "[{1 0.1} {2 0.25}] [{2 1.5}]" {
		t.Fatalf("kl, grad_norm = %s", got)
	}
}

func mustWrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
