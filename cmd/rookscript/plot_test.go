package main

import (
	"bytes"
	"fmt"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// metricsLines returns n training steps, with an eval line every 5 steps when withEval.
func metricsLines(n int, withEval bool, scale float64) []string {
	var ls []string
	for s := 1; s <= n; s++ {
		ls = append(ls, fmt.Sprintf(`{"step":%d,"time":"2026-01-01T00:00:00.000Z","reward":%g,"reward_std":0.2,"kl":%g,"ratio/mean":%g,"clip_ratio/region_mean":%g,"grad_norm":%g,"loss":0.1}`,
			s, scale*float64(s)/float64(n), 0.001*scale*float64(s), 1+0.01*float64(s%3), 0.05*float64(s%4), 2-float64(s)/float64(n)))
		if withEval && s%5 == 0 {
			ls = append(ls, fmt.Sprintf(`{"step":%d,"time":"2026-01-01T00:00:00.000Z","eval/p_format":%g,"eval/reward_mean":%g}`,
				s, scale*float64(s)/float64(n), 0.5*scale*float64(s)/float64(n)))
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

// checkPNG decodes path, checks its size, and that each run's colour is drawn in the panels
// (below the legend strip, which shows every run's colour even with no data).
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
	wantW, wantH := int(figW.Dots(figDPI)+0.5), int(figH.Dots(figDPI)+0.5)
	if b := img.Bounds(); b.Dx() != wantW || b.Dy() != wantH {
		t.Fatalf("%s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), wantW, wantH)
	}
	top := int(headerH.Dots(figDPI)) + 1
	counts := make([]int, runs)
	nonWhite := 0
	b := img.Bounds()
	for y := b.Min.Y + top; y < b.Max.Y; y++ {
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
		if n < 200 {
			t.Errorf("%s: run %d's colour %v drawn in %d pixels of the panels", path, i, runColor(i), n)
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
			name: "missing directory",
			setup: func(t *testing.T, root string) []string {
				return []string{filepath.Join(root, "nope")}
			},
			code: 2, stderr: []string{"nope does not exist"},
		},
		{
			name: "directory without metrics.jsonl",
			setup: func(t *testing.T, root string) []string {
				return []string{root}
			},
			code: 2, stderr: []string{"metrics.jsonl does not exist"},
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
				if !strings.Contains(stderr.String(), s) {
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

// TestPlotPanels: panels with no data for any run say so instead of failing, and every eval/*
// series of every run lands in the eval panel.
func TestPlotPanels(t *testing.T) {
	train := map[string][]metricPoint{"reward": {{1, 0.1}, {2, 0.2}}, "kl": {{1, 0.01}}}
	withEval := map[string][]metricPoint{"eval/p_format": {{5, 0.5}}, "eval/a_acc": {{5, 0.3}, {10, 0.4}}}
	for _, tc := range []struct {
		name string
		runs []plotRun
		want map[string]bool // panel title → hasData
	}{
		{"no runs' data", []plotRun{{name: "empty", series: map[string][]metricPoint{}}},
			map[string]bool{"reward (mean ± std)": false, "KL": false, "gradient norm": false, "evaluation (eval/*)": false}},
		{"training only", []plotRun{{name: "a", series: train}},
			map[string]bool{"reward (mean ± std)": true, "KL": true, "ratio mean": false, "evaluation (eval/*)": false}},
		{"eval in the second run only", []plotRun{{name: "a", series: train}, {name: "b", series: withEval}},
			map[string]bool{"reward (mean ± std)": true, "clip fraction": false, "evaluation (eval/*)": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			panels := buildPanels(tc.runs)
			if len(panels) != gridRows*gridCols {
				t.Fatalf("%d panels for a %dx%d grid", len(panels), gridRows, gridCols)
			}
			seen := map[string]bool{}
			for _, p := range panels {
				seen[p.title] = true
				if want, ok := tc.want[p.title]; ok && p.hasData != want {
					t.Errorf("panel %q hasData %v, want %v", p.title, p.hasData, want)
				}
			}
			for title := range tc.want {
				if !seen[title] {
					t.Errorf("no panel %q", title)
				}
			}
			if err := writePlot(tc.runs, filepath.Join(t.TempDir(), "p.png")); err != nil {
				t.Fatal(err)
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
