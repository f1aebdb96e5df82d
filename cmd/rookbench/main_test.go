package main

import (
	"encoding/json"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/device"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/rollout"
)

func TestParseSections(t *testing.T) {
	all, err := parseSections("", "cpu")
	if err != nil || len(all) != len(sections) {
		t.Fatalf("default: %v %v", all, err)
	}
	sel, err := parseSections("gemm, Engine", "cpu")
	if err != nil || !sel["gemm"] || !sel["engine"] || sel["torch"] || len(sel) != 2 {
		t.Errorf("gemm,engine: %v %v", sel, err)
	}
	var se *SectionError
	if _, err := parseSections("gemm,bogus", "cpu"); !errors.As(err, &se) || se.Section != "bogus" || se.Device != "" {
		t.Errorf("unknown section: %v", err)
	}
	// A GPU runs the engine's sections only, by default and when asked.
	gpu, err := parseSections("", "cuda")
	if err != nil || len(gpu) != len(deviceSections) || gpu["torch"] || !gpu["grpo"] {
		t.Errorf("cuda default: %v %v", gpu, err)
	}
	_, err = parseSections("engine,torch", "cuda")
	if !errors.As(err, &se) || se.Section != "torch" || se.Device != "cuda" {
		t.Errorf("torch on cuda: %v", err)
	}
}

// TestFloor holds the one floor rule to hand-computed cases: per phase the larger of the
// products at the GEMM rate and the bytes beyond the cache at the bandwidth; phases added.
func TestFloor(t *testing.T) {
	nan, both := math.NaN(), rates{gflops: 100, gbps: 100}
	for _, c := range []struct {
		name   string
		r      rates
		phases []phase
		want   float64 // ms; NaN: a rate it needs was not measured
	}{
		{"products only", rates{gflops: 100}, []phase{{flop: 2e9}}, 20},
		{"bytes only", rates{gbps: 10}, []phase{{bytes: 1e9}}, 100},
		{"bytes the cache keeps are free", rates{gbps: 10, llc: 0.5e9}, []phase{{bytes: 1e9}}, 50},
		{"bytes in the cache need no bandwidth", rates{gflops: 100, gbps: nan, llc: 2e9}, []phase{{1e9, 1e9}}, 10},
		{"a phase takes the slower of the two", both, []phase{{flop: 1e9, bytes: 2e9}}, 20},
		{"the other way round", both, []phase{{flop: 4e9, bytes: 2e9}}, 40},
		{"phases add", both, []phase{{flop: 1e9}, {bytes: 2e9}, {flop: 3e9, bytes: 1e9}}, 60},
		{"no phases", rates{gflops: nan, gbps: nan}, nil, 0},
		{"rate not measured", rates{gflops: nan, gbps: 10}, []phase{{flop: 1}}, nan},
		{"bandwidth not measured", rates{gflops: 100, gbps: nan}, []phase{{bytes: 1}}, nan},
	} {
		got := c.r.ms(c.phases...)
		if math.IsNaN(c.want) != math.IsNaN(got) || !math.IsNaN(got) && math.Abs(got-c.want) > 1e-9*c.want {
			t.Errorf("%s: %v ms, want %v", c.name, got, c.want)
		}
	}
}

// TestWork holds what the workloads must compute to GPT-2's shapes and to a batch counted by hand.
func TestWork(t *testing.T) {
	cfg := gpt2.RookWorld124M
	if w, want := weights(cfg, true), 12.0*12*768*768+50257*768; w != want {
		t.Errorf("124M weights %v, want %v", w, want)
	}
	w := weights(cfg, true)
	got := decodeWork(cfg, 64, 100)
	want := []phase{{flop: 2 * w * 64, bytes: 4 * w}, {bytes: 100 * 8 * 12 * 768}}
	if !slices.Equal(got, want) {
		t.Errorf("decode step of 64 rows: %v, want %v", got, want)
	}
	// One layer of 2 channels, a vocabulary of 3: 48 weights a block, 6 in the head. One prompt
	// of 3 tokens, completions of 2 and 1 tokens.
	tiny := gpt2.Config{NumLayers: 1, Channels: 2, VocabSize: 3}
	b := &rollout.Batch{Prompts: [][]int32{{1, 2, 3}}, Completions: []rollout.Completion{
		{Prompt: 0, Tokens: []int32{1, 2}}, {Prompt: 0, Tokens: []int32{1}}}}
	roll, fwd := grpoWork(tiny, b)
	// The prefill: 3 tokens through the blocks, 1 through the head; then the one decode step
	// with a live row (the longer completion): its products, and its prompt's 3 cached
	// positions and its own 1.
	wantRoll := []phase{{flop: 2 * (48*3 + 6)}, {flop: 2 * 54, bytes: 4 * 54}, {bytes: 4 * 8 * 2}}
	if !slices.Equal(roll, wantRoll) {
		t.Errorf("rollout %v, want %v", roll, wantRoll)
	}
	// The packed forward: the prompt but its last token once, then each completion's tokens scored.
	if want := (phase{flop: 2*48*2 + 2*54*3}); fwd != want {
		t.Errorf("forward %v, want %v", fwd, want)
	}
}

func TestValueRow(t *testing.T) {
	r := valueRow("g", "k", "n", "ms", measured([]float64{10, 30, 20}))
	if *r.Median != 20 || *r.Min != 10 || *r.Max != 30 || r.Floor != nil || r.Note != "" {
		t.Errorf("no floor: %+v", r)
	}
	// One floor per run: the ratio is the median of the runs' ratios.
	r = valueRow("g", "k", "n", "ms", measured([]float64{10, 30, 20}), 5, 10, 4)
	if *r.Floor != 5 || *r.OverFloor != 3 {
		t.Errorf("floors per run: floor %v ratio %v, want 5 and 3 (ratios 2, 3, 5)", *r.Floor, *r.OverFloor)
	}
	if r = valueRow("g", "k", "n", "ms", measured([]float64{10}), math.NaN()); r.OverFloor != nil {
		t.Errorf("a floor not measured is none: %+v", r)
	}
	if r = valueRow("g", "k", "n", "ms", skipped("no torch"), 1); r.Note != "not measured: no torch" {
		t.Errorf("not measured: %+v", r)
	}
}

func TestRatioRow(t *testing.T) {
	num, den := measured([]float64{4, 9, 2}), measured([]float64{2, 3, 2})
	if r := ratioRow("g", "k", "n", "", num, den, true); *r.Median != 2 || *r.Min != 1 || *r.Max != 3 {
		t.Errorf("paired: %+v", r)
	}
	if r := ratioRow("g", "k", "n", "", num, den, false); *r.Median != 2 || *r.Min != 2.0/3 || *r.Max != 4.5 {
		t.Errorf("medians: %v %v %v", *r.Median, *r.Min, *r.Max)
	}
	if r := ratioRow("g", "k", "n", "", num, skipped("peer failed"), true); r.Median != nil ||
		!strings.Contains(r.Note, "peer failed") {
		t.Errorf("a side not measured: %+v", r)
	}
}

// TestFasterThanFloorIsABug: a row that beat its floor, or ran above the FMA peak (a rate, or
// a workload whose products ran faster than the peak allows), fails the command, naming the
// row; and only such rows.
func TestFasterThanFloorIsABug(t *testing.T) {
	rows := []Row{
		valueRow("g", "engine.fast", "beat its floor", "ms", measured([]float64{9, 9.5, 8}), 10),
		valueRow("g", "engine.at", "at its floor", "ms", measured([]float64{10}), 10).ofPeak(10),
		valueRow("g", "engine.slow", "above its floor", "ms", measured([]float64{30}), 10).ofPeak(3),
		valueRow("g", "gemm.rate", "no floor", "GFLOP/s", measured([]float64{1})),
		valueRow("g", "gemm.under", "under the peak", "GFLOP/s", measured([]float64{90, 95, 99})).ofPeak(100),
		valueRow("g", "gemm.over", "above the peak", "GFLOP/s", measured([]float64{90, 101, 102})).ofPeak(100),
		valueRow("g", "engine.peak", "above the peak", "ms", measured([]float64{20, 8, 9}), 5).ofPeak(10),
		ratioRow("g", "speedup.x", "a ratio", "", measured([]float64{1}), measured([]float64{2}), true),
	}
	bugs := floorBugs(rows)
	if len(bugs) != 3 || !strings.Contains(bugs[0], "engine.fast") || !strings.Contains(bugs[0], "bench bug") ||
		!strings.Contains(bugs[1], "gemm.over (above the peak) ran at 1.010x the FMA peak") ||
		!strings.Contains(bugs[2], "engine.peak") {
		t.Errorf("bugs %q, want engine.fast's, gemm.over's and engine.peak's", bugs)
	}
}

// TestOfPeak: a row's share of the FMA peak is its median rate over the peak, or the time its
// products take at the peak over its median time; a peak not measured gives none, and the
// rendered note carries it.
func TestOfPeak(t *testing.T) {
	for _, c := range []struct {
		name string
		row  Row
		peak float64
		want float64 // NaN: none
	}{
		{"a rate", valueRow("g", "k", "n", "GFLOP/s", measured([]float64{50, 100, 80})), 200, 0.4},
		{"a time", valueRow("g", "k", "n", "ms", measured([]float64{10, 20, 40})), 5, 0.25},
		{"a time in s", valueRow("g", "k", "n", "s", measured([]float64{2})), 0.5, 0.25},
		{"a peak not measured", valueRow("g", "k", "n", "ms", measured([]float64{10})), math.NaN(), math.NaN()},
		{"no peak", valueRow("g", "k", "n", "GFLOP/s", measured([]float64{10})), 0, math.NaN()},
		{"not measured", valueRow("g", "k", "n", "ms", skipped("x")), 5, math.NaN()},
	} {
		got := c.row.ofPeak(c.peak).OfPeak
		if math.IsNaN(c.want) != (got == nil) || got != nil && math.Abs(*got-c.want) > 1e-12 {
			t.Errorf("%s: share %v, want %v", c.name, got, c.want)
		}
	}
	rep := &Report{Rows: []Row{valueRow("g", "k", "n", "ms", measured([]float64{8})).ofPeak(2)}}
	if md := rep.Markdown(); !strings.Contains(md, "| 0.25 of the FMA peak |") {
		t.Errorf("the share in the note:\n%s", md)
	}
}

// TestFloorRateKernels: the floors' rate is the best median among every kernel family
// measured, the engine's MatMul and OpenBLAS under each family alike; one that failed never
// wins. The CPU's candidates are MatMul, OpenBLAS on the engine's family and on each other
// family the processor runs.
func TestFloorRateKernels(t *testing.T) {
	runs := func(name string, gflops ...float64) *contender {
		c := &contender{name: name}
		for _, v := range gflops {
			c.runs = append(c.runs, sample{ms: 1e3, work: v})
		}
		return c
	}
	failed := runs("openblas_Cooperlake", 900, 900, 900)
	failed.err = errors.New("died")
	for _, c := range []struct {
		name string
		cs   []*contender
		want int
	}{
		{"MatMul fastest", []*contender{runs("matmul", 300, 310, 290), runs("openblas", 200, 210, 190)}, 0},
		{"the engine's OpenBLAS family fastest", []*contender{runs("matmul", 150), runs("openblas", 200)}, 1},
		{"another OpenBLAS family fastest", []*contender{runs("matmul", 300), runs("openblas", 250),
			runs("openblas_SkylakeX", 320, 330, 310)}, 2},
		{"by median, not one fast sample", []*contender{runs("matmul", 100, 100, 500),
			runs("openblas", 120, 120, 110)}, 1},
		{"a failed kernel never wins", []*contender{runs("matmul", 100), failed}, 0},
		{"none measured", []*contender{failed}, -1},
	} {
		if got := fastestMedian(c.cs, rate); got != c.want {
			t.Errorf("%s: kernel %d, want %d", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		own  string
		fams []string
		want []string
	}{
		{"Haswell", []string{"Haswell"}, []string{"matmul", "openblas"}},
		{"Cooperlake", []string{"Haswell", "SkylakeX", "Cooperlake"},
			[]string{"matmul", "openblas", "openblas_Haswell", "openblas_SkylakeX"}},
		{"Haswell", []string{"Haswell", "SkylakeX"}, []string{"matmul", "openblas", "openblas_SkylakeX"}},
		{"Zen", []string{"Haswell"}, []string{"matmul", "openblas", "openblas_Haswell"}},
		{"COOPERLAKE", []string{"Haswell", "SkylakeX", "Cooperlake"},
			[]string{"matmul", "openblas", "openblas_Haswell", "openblas_SkylakeX"}},
		{"Prescott", nil, []string{"matmul", "openblas"}},
	} {
		if got := cpuKernels(c.own, c.fams); !slices.Equal(got, c.want) {
			t.Errorf("OpenBLAS on %s, families %v: kernels %v, want %v", c.own, c.fams, got, c.want)
		}
	}
}

// TestKernelSamplers: on this machine, OpenBLAS's sampler under each family runs that family
// and gives the engine's back after each sample; the FMA peak runs on every thread.
func TestKernelSamplers(t *testing.T) {
	be, err := device.Open("cpu", device.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	own, peak := cpu.BLASCoreName(), fmaPeak(2)
	if peak.sample == nil { // a processor without FMA has no peak to measure; its products still run
		t.Log("the processor has no FMA: no FMA peak")
	} else if best := rate(peak.sample()); !strings.Contains(peak.name, "FMAs on 2 threads") || !(best > 0) {
		t.Errorf("%s: %v GFLOP/s", peak.name, best)
	}
	for _, k := range cpuKernels(own, cpu.BLASFamilies()) {
		s := gemmSampler(be, k, 256, 256, 256)
		if r := rate(s.sample()); cpu.BLASCoreName() != own || !(r > 0) {
			t.Errorf("%s: %v GFLOP/s; the engine's OpenBLAS runs %s after it, was %s", s.name, r,
				cpu.BLASCoreName(), own)
		}
		if _, fam, _ := strings.Cut(k, "_"); k != "matmul" && !strings.Contains(s.name, "OpenBLAS "+fam) {
			t.Errorf("kernel %s: sampler %q", k, s.name)
		}
		t.Logf("%s: %.1f GFLOP/s", s.name, rate(s.sample()))
	}
}

func TestAlternate(t *testing.T) {
	var order []string
	mk := func(name string, failAt int) *contender {
		calls := 0
		return &contender{name: name, run: func() (sample, error) {
			calls++
			order = append(order, name)
			if calls == failAt {
				return sample{}, errors.New("died")
			}
			return sample{ms: float64(calls)}, nil
		}}
	}
	a, b, c, off := mk("a", 0), mk("b", 0), mk("c", 2), &contender{name: "off"}
	b.repeat = 2
	alternate("test", 1, 2, a, off, b, c)
	if want := []string{"a", "b", "b", "c", "a", "b", "b", "c", "a", "b", "b"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	// Warm-up runs are not kept; a contender that failed has its error and no series.
	s := a.series(wallMS)
	if !slices.Equal(s.v, []float64{2, 3}) || len(b.runs) != 4 || c.err == nil || c.series(wallMS).ok() {
		t.Errorf("a %v, b %d runs, c err %v", s.v, len(b.runs), c.err)
	}
	if off.selected() || !a.selected() || !c.selected() {
		t.Error("selected: a contender with a run or an error")
	}
}

func testReport(machine, proc, date string, median float64) *Report {
	return &Report{Machine: machine, Processor: proc, Commit: "abc", Date: date, Command: "rookbench",
		Batch: 4, Seq: 64, Header: []string{"head"}, Rows: []Row{
			valueRow("Forward", "engine.forward", "engine", "ms", measured([]float64{median, median + 2, median - 2}),
				median/2),
			ratioRow("Forward", "speedup.forward_vs_torch", "speed-up", "", measured([]float64{3}),
				measured([]float64{2}), true),
			valueRow("Train", "engine.train_step", "engine | pipes", "ms", skipped("no model")),
		}}
}

// testRoot is a repository root with a README that has the rendered block.
func testRoot(t *testing.T) string {
	root := t.TempDir()
	readme := "# x\n\nbefore\n\n" + readmeBegin + "\nstale\n" + readmeEnd + "\n\nafter\n"
	if err := os.MkdirAll(filepath.Join(root, "bench"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "README.md"), []byte(readme), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestResultRoundTrip(t *testing.T) {
	root := testRoot(t)
	rep := testReport("intel-xeon", "Intel Xeon", "2026-12-01", 10)
	if err := writeResult(root, rep); err != nil {
		t.Fatal(err)
	}
	reps, err := readResults(filepath.Join(root, "bench", "results"))
	if err != nil || len(reps) != 1 {
		t.Fatalf("read back %d results: %v", len(reps), err)
	}
	if !reflect.DeepEqual(reps[0], rep) {
		t.Errorf("read back\n%+v\nwrote\n%+v", reps[0], rep)
	}
	// Every row's median, spread and floor are in the file.
	raw, _ := os.ReadFile(filepath.Join(root, "bench", "results", "intel-xeon.json"))
	for _, field := range []string{`"median": 10`, `"min": 8`, `"max": 12`, `"floor": 5`, `"commit": "abc"`} {
		if !strings.Contains(string(raw), field) {
			t.Errorf("result file lacks %s:\n%s", field, raw)
		}
	}
	// Writing rendered RESULTS.md and the README's block, and left the README's other lines.
	readme, _ := os.ReadFile(filepath.Join(root, "README.md"))
	md, block, err := rendered(root)
	if err != nil || !strings.Contains(string(readme), block) || !strings.Contains(string(readme), "after\n") ||
		strings.Contains(string(readme), "stale") {
		t.Errorf("README after writing:\n%s\n(err %v)", readme, err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "bench", "RESULTS.md")); string(got) != md {
		t.Error("RESULTS.md is not what rendering gives")
	}
	// A file whose machine is not its name is refused.
	if err := os.Rename(filepath.Join(root, "bench", "results", "intel-xeon.json"),
		filepath.Join(root, "bench", "results", "other.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := readResults(filepath.Join(root, "bench", "results")); err == nil {
		t.Error("a result file named for another machine must be refused")
	}
}

// TestRenderDeterministic: the rendering depends on the result files alone, not on the order
// they were written in, and is the same each time.
func TestRenderDeterministic(t *testing.T) {
	reps := []*Report{
		testReport("zen-new", "AMD EPYC", "2026-12-02", 10),
		testReport("xeon", "Intel Xeon", "2026-12-01", 20),
		testReport("zen-old", "AMD EPYC", "2026-11-01", 30),
	}
	var out []string
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}} {
		root := testRoot(t)
		for _, i := range order {
			if err := writeResult(root, reps[i]); err != nil {
				t.Fatal(err)
			}
		}
		md, block, err := rendered(root)
		if err != nil {
			t.Fatal(err)
		}
		md2, block2, _ := rendered(root)
		if md != md2 || block != block2 {
			t.Error("two renderings of the same files differ")
		}
		out = append(out, md+block)
	}
	if out[0] != out[1] || out[0] != out[2] {
		t.Error("the rendering depends on the order the files were written in")
	}
	// By processor, then newest first; a pipe in a name does not split its cell.
	at := func(s string) int { return strings.Index(out[0], s) }
	i, j, k := at("## zen-new"), at("## zen-old"), at("## xeon")
	if i < 0 || !(i < j && j < k) || !strings.Contains(out[0], `engine \| pipes`) {
		t.Errorf("order or cells wrong:\n%s", out[0])
	}
	if !strings.Contains(out[0], "10.0 ms (2.00× floor)") || !strings.Contains(out[0], "1.50×") {
		t.Errorf("headline cells:\n%s", out[0])
	}
}

func TestNoResults(t *testing.T) {
	md, block, err := rendered(testRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if block != readmeBegin+"\n"+noResults+readmeEnd || !strings.Contains(md, noResults) {
		t.Errorf("without result files, the placeholder: block %q", block)
	}
}

// TestReadmeTable holds the README's rendered block to the committed result files, so that a
// figure there never drifts from the run that recorded it.
func TestReadmeTable(t *testing.T) {
	root := filepath.Join("..", "..")
	_, block, err := rendered(root)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := spliceReadme(string(readme), block); err != nil || got != string(readme) {
		t.Errorf("README.md's bench table is not what bench/results renders (run bin/rookbench -render): %v", err)
	}
	md, _, _ := rendered(root)
	if got, err := os.ReadFile(filepath.Join(root, "bench", "RESULTS.md")); err != nil || string(got) != md {
		t.Errorf("bench/RESULTS.md is not what bench/results renders (run bin/rookbench -render): %v", err)
	}
}

func TestSpliceReadme(t *testing.T) {
	twice := readmeBegin + readmeEnd + readmeBegin + readmeEnd
	for _, bad := range []string{"no markers", readmeEnd + readmeBegin, twice} {
		if _, err := spliceReadme(bad, "x"); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
	if got, _ := spliceReadme("a "+readmeBegin+" old "+readmeEnd+" b", "NEW"); got != "a NEW b" {
		t.Errorf("spliced %q", got)
	}
}

func TestTorchEnv(t *testing.T) {
	// What the process sees: exec.Cmd runs a key's last value.
	seen := func(env []string) map[string]string {
		m := map[string]string{}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			m[k] = v
		}
		return m
	}
	base := []string{"A=1", "OMP_WAIT_POLICY=ACTIVE", "OPENBLAS_CORETYPE=Prescott", "GLIBC_TUNABLES=x=1", "B=2"}
	want := map[string]string{"A": "1", "B": "2", "OMP_WAIT_POLICY": "PASSIVE",
		"OPENBLAS_CORETYPE": "Cooperlake", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
	if got := seen(torchEnv(base, "Cooperlake", false)); !maps.Equal(got, want) {
		t.Errorf("env %v, want %v", got, want)
	}
	// The engine capped at AVX2: the peer's operators and oneDNN are capped too.
	got := seen(torchEnv(append(base, "ONEDNN_MAX_CPU_ISA=AVX512_CORE"), "Haswell", true))
	if got["ATEN_CPU_CAPABILITY"] != "avx2" || got["ONEDNN_MAX_CPU_ISA"] != "AVX2" ||
		got["OPENBLAS_CORETYPE"] != "Haswell" {
		t.Errorf("capped env %v", got)
	}
	if !slices.Equal(base[:2], []string{"A=1", "OMP_WAIT_POLICY=ACTIVE"}) {
		t.Error("torchEnv changed its argument")
	}
}

// fakeTorch stands in for a PyTorch script in --serve mode (a shell script run with sh): its
// forward is fastest under SkylakeX, and under Broken it dies before its ready line.
const fakeTorch = `echo "progress on stderr" >&2
[ "$OPENBLAS_CORETYPE" = Broken ] && { echo "Illegal instruction" >&2; exit 4; }
echo "a library's stdout noise"
echo "{\"ready\": true, \"torch\": \"9.9\", \"omp_wait_policy\": \"$OMP_WAIT_POLICY\", \
  \"openblas_coretype\": \"$OPENBLAS_CORETYPE\", \"blas_core\": \"$OPENBLAS_CORETYPE\", \
  \"cpu_capability\": \"AVX2\"}"
ms=12.5
[ "$OPENBLAS_CORETYPE" = SkylakeX ] && ms=10
[ "$OPENBLAS_CORETYPE" = Cooperlake ] && ms=11
while read op; do
  case $op in
    forward) echo "{\"ms\": $ms}" ;;
    gen:static) echo "{\"ms\": 30, \"prefill_ms\": 10, \"decode_ms\": 20}" ;;
    die) echo "dying" >&2; exit 3 ;;
    *) echo "{\"error\": \"unknown op $op\"}" ;;
  esac
done
`

func TestStartTorch(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "fake.sh"), []byte(fakeTorch), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OMP_WAIT_POLICY", "ACTIVE") // the caller's must not reach the peer
	b := &bench{python: "sh", scripts: dir, threads: 3, torchFam: "Haswell"}
	p, err := b.startTorch("fake.sh")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Info.Torch != "9.9" || p.Info.OMPWaitPolicy != "PASSIVE" || p.Info.CoreType != "Haswell" ||
		b.peer != &p.Info {
		t.Errorf("info %+v", p.Info)
	}
	if s, err := p.Do("forward"); err != nil || s.ms != 12.5 {
		t.Errorf("forward: %+v %v", s, err)
	}
	if s, err := p.Do("gen:static"); err != nil || s.prefill != 10 || s.decode != 20 {
		t.Errorf("gen: %+v %v", s, err)
	}
	if _, err := p.Do("bogus"); err == nil || !strings.Contains(err.Error(), "unknown op bogus") {
		t.Errorf("unknown op: %v", err)
	}
	if _, err := p.Do("die"); err == nil || !strings.Contains(err.Error(), "dying") {
		t.Errorf("a dead process: %v", err)
	}
	if _, err := b.startTorch("missing.py"); err == nil {
		t.Error("a missing script must be an error")
	}
}

// TestTorchFamily: the peers run the OpenBLAS family under which torch's forward was fastest,
// each family's process timed in alternation; a family torch dies under drops out, and the
// header names the family and why. Where every process dies, the peer fails with its error.
func TestTorchFamily(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "torch_gpt2.py"), []byte(fakeTorch), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &bench{python: "sh", scripts: dir, threads: 2, batch: 4, seq: 64}
	if err := b.torchFamily([]string{"Haswell", "Broken", "SkylakeX", "Cooperlake"}); err != nil {
		t.Fatal(err)
	}
	if b.torchFam != "SkylakeX" || b.torchWhy != "the fastest forward of OPENBLAS_CORETYPE=Haswell 12.5 ms, "+
		"SkylakeX 10.0 ms, Cooperlake 11.0 ms" {
		t.Errorf("family %s: %s", b.torchFam, b.torchWhy)
	}
	p, err := b.startTorch("torch_gpt2.py")
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if p.Info.CoreType != "SkylakeX" || b.peer != &p.Info {
		t.Errorf("the peer runs %+v", p.Info)
	}
	header := strings.Join(b.report(time.Now(), "", "torch").Header, "\n")
	if !strings.Contains(header, "torch 9.9: OpenBLAS SkylakeX (the fastest forward of "+
		"OPENBLAS_CORETYPE=Haswell") ||
		!strings.Contains(header, "OPENBLAS_CORETYPE=SkylakeX") || !strings.Contains(header, "backward OpenBLAS "+
		cpu.BLASCoreName()+" ("+cpu.BLASCoreReason()+")") {
		t.Errorf("header:\n%s", header)
	}
	b = &bench{python: "sh", scripts: dir, threads: 2, batch: 4, seq: 64}
	err = b.torchFamily([]string{"Broken"})
	if err == nil || !strings.Contains(err.Error(), "Illegal instruction") {
		t.Errorf("torch dies under every family: %v", err)
	}
	if err := b.torchFamily(nil); err != nil || b.torchFam != cpu.BLASCoreName() {
		t.Errorf("no family to try: %s, %v", b.torchFam, err)
	}
}

const llmcOutput = `[GPT-2]
val loss 5.325522
step 0: train loss 5.356189 (took 16000.5 ms)
step 1: train loss 4.300870 (took 15012.25 ms)
step 2: train loss 4.623082 (took 15100 ms)
`

func TestLLMC(t *testing.T) {
	ms, err := llmcStepMS(strings.NewReader(llmcOutput), 1, 2)
	if err != nil || !slices.Equal(ms, []float64{15012.25, 15100}) {
		t.Errorf("warm-up 1, 2 runs: %v %v", ms, err)
	}
	if _, err := llmcStepMS(strings.NewReader(llmcOutput), 1, 5); err == nil {
		t.Error("too few steps must be an error")
	}
	if s, err := runLLMC(t.TempDir(), 2, 1, 2); err != nil || s.ok() || !strings.Contains(s.why, "train_gpt2") {
		t.Errorf("no llm.c there: %+v %v", s, err)
	}
}

func TestMachineName(t *testing.T) {
	for _, c := range []struct{ proc, dev, want string }{
		{"Intel(R) Xeon(R) Processor", "cpu", "intel-xeon"},
		{"AMD EPYC 9R14 96-Core Processor", "cpu", "amd-epyc-9r14"},
		{"AMD EPYC 9R14 96-Core Processor, kernels capped at AVX2", "cpu", "amd-epyc-9r14-avx2"},
		{"NVIDIA H100 80GB HBM3", "cuda", "nvidia-h100-80gb-hbm3"},
	} {
		if got := machineName(c.proc, c.dev); got != c.want {
			t.Errorf("machineName(%q) = %q, want %q", c.proc, got, c.want)
		}
	}
}

// TestCommittedResults: each committed result file reads back, names its commit and date, and
// has no row faster than its floor.
func TestCommittedResults(t *testing.T) {
	reps, err := readResults(filepath.Join("..", "..", "bench", "results"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if r.Commit == "" || r.Date == "" || r.Processor == "" || r.Command == "" {
			t.Errorf("%s: a result names its processor, commit, date and command", r.Machine)
		}
		if bugs := floorBugs(r.Rows); len(bugs) > 0 {
			t.Errorf("%s: %q", r.Machine, bugs)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Error(err)
		}
	}
}
