// Command rookbench measures the rookscript engine on this machine against the floors the
// hardware sets (floor.go) and against peers run in the same command, and prints one table.
//
// Sections (-only, default all):
//
//	gemm         the rates floors take (products by every kernel family, memory bandwidth), the FMA peak
//	engine       GPT-2 124M, random weights: the forward, and a train step as the engine trains
//	torch        PyTorch CPU at its best here (its fastest OpenBLAS family), beside engine and gen
//	llmc         llm.c's CPU trainer, when LLMC_DIR names a built checkout
//	gen          KV-cache generation: prefill, decode steps of 64 and 8 rows
//	grpo         a GRPO step by phase: rollout, reference forward, update
//	dp           a data-parallel GRPO step on 1 and 2 ranks (mpirun)
//	mem          peak memory against the analytic size (gpt2.Footprint)
//
// -device cuda runs gemm, engine, gen and grpo on a GPU. A workload faster than its floor, or a
// rate above the FMA peak, is a bench bug: the command names the row, writes no result and exits
// 1. Peers are servers timing an op a request, so that run i of each side meets the same machine.
// From the repository root, a run of every section writes bench/results/<machine>.json and
// renders bench/RESULTS.md and the README's table from all result files; -render only renders.
package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/device"
	"github.com/rookscript/rookscript/engine/gpt2"
)

const modelSpec = "random:124m@seed=42" // GPT-2 124M, random weights, llm.c's init seed

var (
	sections       = []string{"gemm", "engine", "torch", "llmc", "gen", "grpo", "dp", "mem"}
	deviceSections = []string{"gemm", "engine", "gen", "grpo"}
)

func progress(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }

func main() {
	b := &bench{llmcDir: os.Getenv("LLMC_DIR")}
	flag.IntVar(&b.runs, "runs", 5, "timed runs per measurement")
	flag.IntVar(&b.warmup, "warmup", 1, "untimed runs before the timed ones")
	flag.IntVar(&b.threads, "threads", runtime.NumCPU(), "threads of the engine's pool, of torch and of llm.c")
	flag.IntVar(&b.genRuns, "gen-runs", 3, "timed generations in gen")
	flag.IntVar(&b.batch, "batch", 4, "sequences in the forward and train step (B)")
	flag.IntVar(&b.seq, "seq", 64, "tokens per sequence in the forward and train step (T)")
	flag.StringVar(&b.device, "device", "cpu", "the engine's backend: cpu, or cuda (built with -tags cuda)")
	flag.StringVar(&b.python, "python", cmp.Or(os.Getenv("PYTHON"), "/usr/bin/python3"), "Python with torch")
	flag.StringVar(&b.scripts, "scripts", "bench", "the repository's bench/ directory (its PyTorch scripts)")
	only := flag.String("only", "", "comma list of sections: "+strings.Join(sections, ",")+" (default all)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of this process to this file")
	machine := flag.String("machine", "", "the result file's name (default: from the processor or GPU)")
	render := flag.Bool("render", false, "only render bench/RESULTS.md and the README's table")
	dpRank := flag.Bool("dp-child", false, "internal: one rank of the dp section")
	memCase := flag.String("mem-case", "", "internal: one case of the mem section")
	flag.Parse()
	root := filepath.Dir(b.scripts)
	runtime.GOMAXPROCS(b.threads)
	switch {
	case *render:
		check(renderResults(root))
		return
	case *dpRank:
		check(dpChild(b.runs, b.warmup))
		return
	case *memCase != "":
		check(runMemCase(*memCase, b.threads))
		return
	case flag.NArg() > 0:
		check(fmt.Errorf("unexpected arguments %q", flag.Args()))
	case b.runs < 1 || b.warmup < 0 || b.threads < 1 || b.genRuns < 1 || b.batch < 1 || b.seq < 1:
		check(fmt.Errorf("-runs, -threads, -gen-runs, -batch and -seq must be at least 1, -warmup at least 0"))
	}
	var err error
	b.sel, err = parseSections(*only, b.device)
	check(err)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		check(cmp.Or(err, pprof.StartCPUProfile(f)))
		defer pprof.StopCPUProfile()
	}
	commit := gitCommit(root) // the checkout the binaries were built from, before the tree can change
	rep := b.run(cmp.Or(*only, "all"))
	rep.Machine, rep.Commit = cmp.Or(*machine, machineName(rep.Processor, b.device)), commit
	fmt.Println(rep.Markdown() + "\n" + headline([]*Report{rep}, ""))
	if len(b.failed) > 0 {
		check(fmt.Errorf("%d failure(s), no result written:\n  %s", len(b.failed), strings.Join(b.failed, "\n  ")))
	}
	if *only == "" { // a partial run is no machine's result
		check(writeResult(root, rep))
	}
}

// check ends the command on an error, the CPU profile written first.
func check(err error) {
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "rookbench:", err)
		os.Exit(1)
	}
}

// SectionError is an -only section the bench does not have (Device ""), or one that runs on
// the CPU only, asked of Device, which runs Avail.
type SectionError struct {
	Section, Device string
	Avail           []string
}

func (e *SectionError) Error() string {
	if e.Device == "" {
		return fmt.Sprintf("-only: unknown section %q (sections: %s)", e.Section, strings.Join(sections, ", "))
	}
	return fmt.Sprintf("-only: section %q runs on the CPU only; -device %s runs %s", e.Section, e.Device, strings.Join(e.Avail, ", "))
}

// parseSections turns -only into a set; empty selects every section the device runs.
func parseSections(only, dev string) (map[string]bool, error) {
	avail, sel := sections, map[string]bool{}
	if dev != "cpu" {
		avail = deviceSections
	}
	only = strings.ToLower(strings.ReplaceAll(cmp.Or(only, strings.Join(avail, ",")), " ", ""))
	for _, s := range strings.Split(only, ",") {
		if !slices.Contains(sections, s) {
			return nil, &SectionError{Section: s}
		} else if !slices.Contains(avail, s) {
			return nil, &SectionError{Section: s, Device: dev, Avail: avail}
		}
		sel[s] = true
	}
	return sel, nil
}

// bench is one command: its settings, what it measured, and the rows it made.
type bench struct {
	runs, warmup, threads, genRuns, batch, seq int
	python, scripts, llmcDir, device           string
	sel                                        map[string]bool

	be                 backend.Backend
	model              *gpt2.Model
	rows               []Row
	failed             []string
	peer               *torchInfo // what the first PyTorch peer reported of its kernels
	torchFam, torchWhy string     // the peers' OpenBLAS family and why (torchFamily)
	best               sampler    // the fastest product kernel: the floors' rate
	peak               float64    // the FMA peak's best sample, GFLOP/s (0: not measured)
	mem                sampler    // the memory bandwidth the floors take
	train              series     // the engine's train step, for llm.c's speed-up
}

func (b *bench) add(r Row) { b.rows = append(b.rows, r) }

// failure records a failed measurement and returns it as a series not measured.
func (b *bench) failure(what string, err error) series {
	b.failed = append(b.failed, what+": "+err.Error())
	progress("rookbench: %s: %v", what, err)
	return skipped(err.Error())
}

// record is a contender's runs as a series, its failure recorded.
func (b *bench) record(c *contender, value func(sample) float64) series {
	if c.err != nil {
		return b.failure(c.name, c.err)
	}
	return c.series(value)
}

// run measures the selected sections in order and reports them.
func (b *bench) run(only string) *Report {
	start, load := time.Now(), loadAvg()
	for _, s := range []struct {
		when string
		f    func()
	}{{"gemm", b.runGEMM}, {"engine torch", b.runSteps}, {"llmc", b.runLLMC},
		{"gen torch", b.runGen}, {"grpo", b.runGRPO}, {"dp", b.runDP}, {"mem", b.runMem}} {
		if keys := strings.Fields(s.when); slices.ContainsFunc(keys, func(k string) bool { return b.sel[k] }) {
			s.f()
		}
	}
	return b.report(start, load, only)
}

// backend is the engine's, opened once so that a GPU has one context for every section.
func (b *bench) backend() (backend.Backend, error) {
	var err error
	if b.be == nil {
		b.be, err = device.Open(b.device, device.Options{Threads: b.threads})
	}
	return b.be, err
}

// Row is one line of the table. A row not measured has no median and says why in Note.
type Row struct {
	Group     string    `json:"group"`
	Key       string    `json:"key"` // stable: engine.train_step, speedup.forward_vs_torch, …
	Name      string    `json:"name"`
	Unit      string    `json:"unit"` // ms, s, GFLOP/s, GB/s, MB, or x (a ratio)
	Samples   []float64 `json:"samples,omitempty"`
	Median    *float64  `json:"median,omitempty"`
	Min       *float64  `json:"min,omitempty"`
	Max       *float64  `json:"max,omitempty"`
	Floor     *float64  `json:"floor,omitempty"`          // in the row's unit
	OverFloor *float64  `json:"floor_ratio,omitempty"`    // the median over the floor
	OfPeak    *float64  `json:"fma_peak_share,omitempty"` // the share of the FMA peak (ofPeak)
	Note      string    `json:"note,omitempty"`
}

func ptr(v float64) *float64 { return &v }

// valueRow is a row of s, against its floor in its unit where one is given: one per run (the
// ratio then the median of the runs' ratios) or one for all. A floor not measured is none.
func valueRow(group, key, name, unit string, s series, floor ...float64) Row {
	r := Row{Group: group, Key: key, Name: name, Unit: unit, Note: "not measured: " + s.why}
	if !s.ok() {
		return r
	}
	r.Samples, r.Median, r.Min, r.Max, r.Note = s.v, ptr(s.median()), ptr(s.best(false)), ptr(s.best(true)), ""
	if len(floor) == 0 || slices.ContainsFunc(floor, math.IsNaN) {
		return r
	}
	q := make([]float64, len(s.v))
	for i, v := range s.v {
		q[i] = v / floor[min(i, len(floor)-1)]
	}
	if r.Floor = ptr(median(floor)); *r.Floor > 0 {
		r.OverFloor = ptr(median(q))
	}
	return r
}

// ofPeak sets a row's share of the FMA peak, and says it in its note: its median rate over the
// peak, or the time its products take at the peak over its median time; none where the peak
// is not above 0.
func (r Row) ofPeak(peak float64) Row {
	if r.Median != nil && peak > 0 {
		if r.OfPeak = ptr(peak / *r.Median); r.Unit == "GFLOP/s" {
			r.OfPeak = ptr(*r.Median / peak)
		}
		r.Note = strings.TrimSuffix(fmt.Sprintf("%.3g of the FMA peak; %s", *r.OfPeak, r.Note), "; ")
	}
	return r
}

// ratioRow is num/den: the median of the per-run ratios where the runs alternated (paired),
// else the ratio of the medians; min and max the extreme ratios.
func ratioRow(group, key, name, note string, num, den series, paired bool) Row {
	r := Row{Group: group, Key: key, Name: name, Unit: "x", Note: "not measured: " + cmp.Or(num.why, den.why, "no runs")}
	switch {
	case !num.ok() || !den.ok():
	case paired && len(num.v) == len(den.v):
		q := make([]float64, len(num.v))
		for i := range q {
			q[i] = num.v[i] / den.v[i]
		}
		r.Samples, r.Median, r.Min, r.Max = q, ptr(median(q)), ptr(slices.Min(q)), ptr(slices.Max(q))
		r.Note = strings.TrimPrefix(note+", paired runs", ", ")
	default:
		r.Median = ptr(num.median() / den.median())
		r.Min, r.Max = ptr(num.best(false)/den.best(true)), ptr(num.best(true)/den.best(false))
		r.Note = strings.TrimPrefix(note+", ratio of medians", ", ")
	}
	return r
}

// versus adds the engine's row of key and the peer's, each against floor, and the engine's
// speed-up over the peer, their runs paired (they alternated). A side not selected has no row.
func (b *bench) versus(group, key, peer string, eng, p *contender, value func(sample) float64, unit string,
	floor, atPeak float64) {
	var s [2]series
	for i, c := range []*contender{eng, p} {
		if c.selected() {
			s[i] = b.record(c, value)
			b.add(valueRow(group, []string{"engine", peer}[i]+"."+key, c.name, unit, s[i], floor).ofPeak(atPeak))
		}
	}
	if eng.selected() && p.selected() {
		name := "engine speed-up over " + p.name
		b.add(ratioRow(group, "speedup."+key+"_vs_"+peer, name, peer+" / engine", s[1], s[0], true))
	}
}

// floorBugs names the rows that ran faster than their floor or above the FMA peak. A floor is
// a lower bound built from rates measured beside its workload, and no product outruns every
// core's FMAs, so either means the bench mismeasured.
func floorBugs(rows []Row) []string {
	var out []string
	for _, r := range rows {
		name := strings.TrimSpace(r.Name)
		if r.OverFloor != nil && *r.OverFloor < 1 {
			out = append(out, fmt.Sprintf("%s (%s) took %.3fx its floor: a floor beaten is a bench bug, not a result",
				r.Key, name, *r.OverFloor))
		}
		if r.OfPeak != nil && *r.OfPeak > 1 {
			out = append(out, fmt.Sprintf("%s (%s) ran at %.3fx the FMA peak: a rate above the peak is a bench bug",
				r.Key, name, *r.OfPeak))
		}
	}
	return out
}

// Report is one command's result: what a result file in bench/results holds.
type Report struct {
	Machine   string   `json:"machine"`
	Processor string   `json:"processor"` // the CPU, or the GPU the figures are of
	Commit    string   `json:"commit"`
	Date      string   `json:"date"`
	Command   string   `json:"command"`
	Source    string   `json:"source,omitempty"` // of a result no run wrote: where it comes from
	Batch     int      `json:"batch,omitempty"`
	Seq       int      `json:"seq,omitempty"`
	Header    []string `json:"header,omitempty"` // the machine, and the kernels each side ran
	Rows      []Row    `json:"rows"`
}

// report checks every row against its floor and assembles the result.
func (b *bench) report(start time.Time, load, only string) *Report {
	b.failed = append(b.failed, floorBugs(b.rows)...)
	proc, on := cpuName(), "the CPU"
	engine := "MatMul " + cpu.Capability() + "; backward OpenBLAS " + cpu.BLASCoreName() +
		" (" + cpu.BLASCoreReason() + ")"
	if d, ok := b.be.(interface{ Describe() string }); ok && b.device != "cpu" {
		proc, _, _ = strings.Cut(d.Describe(), " (")
		on, engine = d.Describe(), "MatMul; backward cuBLAS SGEMM, FP32"
	} else if cpu.Capped() {
		proc += ", kernels capped at AVX2"
	}
	header := []string{
		fmt.Sprintf("rookbench (%s): GPT-2 124M, random weights (%s), on %s; %d threads for each side",
			only, modelSpec, on, b.threads),
		fmt.Sprintf("medians of %d timed runs after %d warm-up (generations: %d, of 8 rows %d); "+
			"x rows: engine speed-up, > 1 = engine faster", b.runs, b.warmup, b.genRuns, b.genRuns*gen8Repeat),
		fmt.Sprintf("machine: %s, %d CPUs, last-level cache %d MiB; %s; %s; transparent huge pages %s",
			cpuName(), runtime.NumCPU(), lastLevelCache()>>20, runtime.Version(), strings.TrimSpace(cpu.BLASConfig()),
			cmp.Or(cpu.HugePageMode(), "none")),
		fmt.Sprintf("load average (1, 5, 15 min): %s before, %s after; %.0f s in all",
			load, loadAvg(), time.Since(start).Seconds()),
		"engine: forward products (batch-invariant, DESIGN §6.1) " + engine,
	}
	if b.best.sample != nil {
		header = append(header, "floors' GEMM rate: "+b.best.name+", the fastest median of the gemm candidates")
	}
	if p := b.peer; p != nil {
		env := strings.Join(torchEnv(nil, p.CoreType, cpu.Capped()), " ")
		header = append(header, fmt.Sprintf("torch %s: OpenBLAS %s (%s), operators %s, oneDNN %s; %s", p.Torch,
			p.BLASCore, b.torchWhy, p.Capability, p.OneDNNISA, env))
	}
	return &Report{Processor: proc, Date: start.UTC().Format("2006-01-02"),
		Command: strings.Join(append([]string{"rookbench"}, os.Args[1:]...), " "),
		Batch:   b.batch, Seq: b.seq, Header: header, Rows: b.rows}
}

// cpuName is the processor's model name, as /proc/cpuinfo gives it.
func cpuName() string {
	raw, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// lastLevelCache is the size in bytes of the highest-level cache sysfs lists for CPU 0 (its last index).
func lastLevelCache() int {
	sizes, _ := filepath.Glob("/sys/devices/system/cpu/cpu0/cache/index[0-9]/size")
	raw, _ := os.ReadFile(slices.Max(append(sizes, ""))) // the highest index; none reads "": 0
	s := strings.TrimSpace(string(raw))
	n, _ := strconv.Atoi(strings.TrimRight(s, "KM"))
	return n * max(1, map[string]int{"K": 1 << 10, "M": 1 << 20}[strings.TrimLeft(s, "0123456789")])
}

func loadAvg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// machineName is a result file's name from the processor (or the GPU): lower case, its
// trademarks, frequency and generic words dropped.
func machineName(proc, dev string) string {
	generic := regexp.MustCompile(`\((R|TM|tm|r)\)|@.*$|\bCPU\b|\bProcessor\b|[0-9]+-Core|kernels capped at`)
	s := generic.ReplaceAllString(proc, " ")
	s = strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(s), "-"), "-")
	if dev != "cpu" && !strings.Contains(s, "nvidia") {
		s = dev + "-" + s
	}
	return cmp.Or(s, "machine")
}

// gitCommit is the short commit of root's checkout, "-dirty" with tracked changes, or "unknown".
func gitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if exec.Command("git", "-C", root, "diff", "--quiet", "HEAD").Run() != nil {
		c += "-dirty"
	}
	return c
}

// Results live in files, one per machine (bench/results/<machine>.json); bench/RESULTS.md
// and the README's table are rendered from all of them, so that no figure is written by hand
// and a test holds the rendered ones to the files.

const (
	readmeBegin = "<!-- bench:begin: rendered from bench/results by bin/rookbench -render; do not edit -->"
	readmeEnd   = "<!-- bench:end -->"
	noResults   = "No results yet: run `make bench`.\n"
)

// writeResult writes rep to root's bench/results/<machine>.json and renders from them all.
func writeResult(root string, rep *Report) error {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetIndent("", "  ")
	e.SetEscapeHTML(false)
	path := filepath.Join(root, "bench", "results", rep.Machine+".json")
	if err := cmp.Or(e.Encode(rep), os.MkdirAll(filepath.Dir(path), 0o755)); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return err
	}
	progress("rookbench: wrote %s", path)
	return renderResults(root)
}

// readResults are the result files in dir, by processor, then newest first.
func readResults(dir string) ([]*Report, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	var reps []*Report
	for _, p := range paths {
		var r Report
		raw, err := os.ReadFile(p)
		if err = cmp.Or(err, json.Unmarshal(raw, &r)); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		} else if want := strings.TrimSuffix(filepath.Base(p), ".json"); r.Machine != want {
			return nil, fmt.Errorf("%s: machine %q, want the file's name %q", p, r.Machine, want)
		}
		reps = append(reps, &r)
	}
	slices.SortFunc(reps, func(a, b *Report) int {
		return cmp.Or(strings.Compare(a.Processor, b.Processor), strings.Compare(b.Date, a.Date),
			strings.Compare(a.Machine, b.Machine))
	})
	return reps, err
}

// renderResults writes bench/RESULTS.md and the README's table from bench/results.
func renderResults(root string) error {
	md, block, err := rendered(root)
	readme, err2 := os.ReadFile(filepath.Join(root, "README.md"))
	if err = cmp.Or(err, err2); err != nil {
		return err
	}
	out, err := spliceReadme(string(readme), block)
	if err != nil {
		return err
	}
	progress("rookbench: rendering bench/RESULTS.md and README.md's table")
	return cmp.Or(os.WriteFile(filepath.Join(root, "bench", "RESULTS.md"), []byte(md), 0o644),
		os.WriteFile(filepath.Join(root, "README.md"), []byte(out), 0o644))
}

// rendered is what bench/RESULTS.md and the README's block hold for root's result files.
func rendered(root string) (md, block string, err error) {
	reps, err := readResults(filepath.Join(root, "bench", "results"))
	if err != nil {
		return "", "", err
	}
	return resultsMarkdown(reps), readmeBegin + "\n" + headline(reps, "bench/RESULTS.md") + readmeEnd, nil
}

// spliceReadme puts block in place of readme's one rendered block.
func spliceReadme(readme, block string) (string, error) {
	i, j := strings.Index(readme, readmeBegin), strings.Index(readme, readmeEnd)
	if i < 0 || j < i || strings.Count(readme, readmeBegin) > 1 {
		return "", fmt.Errorf("README.md needs one %q … %q block", readmeBegin, readmeEnd)
	}
	return readme[:i] + block + readme[j+len(readmeEnd):], nil
}

// headlineCols are the headline table's workload columns: a title, then its rows' keys.
var headlineCols = [][]string{
	{"forward", "engine.forward"},
	{"train step", "engine.train_step"},
	{"decode step, 64 / 8 rows", "engine.gen_decode_step", "engine.gen_decode_step_8"},
	{"GRPO step", "engine.grpo_total_s"},
	{"speed-up over torch: forward / train", "speedup.forward_vs_torch", "speedup.train_step_vs_torch"},
}

// headline is a line per result: each workload's median and its time over its floor.
func headline(reps []*Report, link string) string {
	if len(reps) == 0 {
		return noResults
	}
	head, rule := "| processor | run | B×T |", "\n|---|---|---|"
	for _, c := range headlineCols {
		head, rule = head+" "+c[0]+" |", rule+"---|"
	}
	out := head + rule + "\n"
	for _, r := range reps {
		out += fmt.Sprintf("| %s | [%s, %s](%s#%s) | %d×%d |", r.Processor, r.Date, r.Commit, link, r.Machine,
			r.Batch, r.Seq)
		for _, c := range headlineCols {
			out += " " + r.cell(c[1:]...) + " |"
		}
		out += "\n"
	}
	return out
}

// cell is the medians of the rows of keys with their units, and their times over their
// floors: "<median> <unit> (<ratio>× floor)"; "–" for a row not measured.
func (r *Report) cell(keys ...string) string {
	var out []string
	for _, k := range keys {
		i := slices.IndexFunc(r.Rows, func(x Row) bool { return x.Key == k && x.Median != nil })
		switch {
		case i < 0:
			out = append(out, "–")
		case r.Rows[i].Unit == "x":
			out = append(out, num(r.Rows[i].Median, "x")+"×")
		case r.Rows[i].OverFloor != nil:
			out = append(out, fmt.Sprintf("%s %s (%s× floor)", num(r.Rows[i].Median, ""), r.Rows[i].Unit,
				num(r.Rows[i].OverFloor, "x")))
		default:
			out = append(out, num(r.Rows[i].Median, "")+" "+r.Rows[i].Unit)
		}
	}
	return strings.Join(out, " / ")
}

// resultsMarkdown is bench/RESULTS.md: the headline, then every result in full.
func resultsMarkdown(reps []*Report) string {
	var b strings.Builder
	b.WriteString("# Bench results\n\n" +
		"Rendered by `bin/rookbench -render` from [results/](results/), a file per machine, which `make bench`\n" +
		"writes. Do not edit: a test holds this file and the README's table to the results. A workload's floor\n" +
		"is, phase by phase, its weight products at the GEMM rate or its bytes beyond the last-level cache at\n" +
		"the memory bandwidth, whichever is slower, both sampled beside it (cmd/rookbench/floor.go).\n\n")
	b.WriteString(headline(reps, ""))
	for _, r := range reps {
		b.WriteString("\n## " + r.Machine + "\n\n" + r.Markdown())
	}
	return b.String()
}

// Markdown is one result: where it comes from, its header, and its rows under their groups.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s; %s, commit %s; `%s`\n", r.Processor, r.Date, r.Commit, r.Command)
	if r.Source != "" {
		b.WriteString("\n" + r.Source + "\n")
	}
	if len(r.Header) > 0 {
		b.WriteString("\n```text\n" + strings.Join(r.Header, "\n") + "\n```\n")
	}
	b.WriteString("\n| measurement | median | min | max | unit | floor | /floor | note |\n" +
		"|---|---|---|---|---|---|---|---|\n")
	group := ""
	for _, row := range r.Rows {
		if row.Group != group {
			group = row.Group
			fmt.Fprintf(&b, "| **%s** | | | | | | | |\n", mdCell(group))
		}
		cells := []string{mdCell(strings.TrimSpace(row.Name)), num(row.Median, row.Unit), num(row.Min, row.Unit),
			num(row.Max, row.Unit), row.Unit, num(row.Floor, row.Unit), num(row.OverFloor, "x"), mdCell(row.Note)}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

// num formats a cell: ratios with two decimals, else one, or three significant digits below 1.
func num(v *float64, unit string) string {
	switch {
	case v == nil || math.IsNaN(*v):
		return ""
	case unit == "x":
		return fmt.Sprintf("%.2f", *v)
	case *v != 0 && math.Abs(*v) < 1:
		return fmt.Sprintf("%.3g", *v)
	}
	return fmt.Sprintf("%.1f", *v)
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
