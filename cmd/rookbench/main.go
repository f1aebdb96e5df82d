// Command rookbench measures the rookscript engine on this machine against the floors the
// hardware sets (floor.go) and against peers run in the same command, and prints one table.
//
// Sections (-only, default all):
//
//	gemm         the rates floors take: the forward's product (MatMul) and the vendor's SGEMM
//	             at the MLP's shapes, and the memory bandwidth
//	engine       GPT-2 124M, random weights: the forward, and a train step as the engine trains
//	torch        PyTorch CPU at its best here, beside engine and gen (bench/torch_*.py)
//	llmc         llm.c's CPU trainer, when LLMC_DIR names a built checkout
//	gen          KV-cache generation: prefill, decode steps of 64 and 8 rows
//	grpo         a GRPO step by phase: rollout, reference forward, update
//	dp           a data-parallel GRPO step on 1 and 2 ranks (mpirun)
//	mem          peak memory against the analytic size (gpt2.Footprint)
//
// -device cuda runs gemm, engine, gen and grpo on a GPU. A workload faster than its floor is a
// bench bug: the command names the row, writes no result and exits 1. Peers run as servers
// that time one op a request, so that run i of each side sees the same machine. Run from the
// repository root, a run of every section writes bench/results/<machine>.json and renders
// bench/RESULTS.md and the README's table from all result files (report.go); -render only
// renders.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/rookscript/rookscript/engine/backend"
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
	b := &bench{}
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
	b.llmcDir = os.Getenv("LLMC_DIR")
	rep := b.run(cmp.Or(*only, "all"))
	rep.Machine, rep.Commit = cmp.Or(*machine, machineName(rep.Processor, b.device)), gitCommit(root)
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

// parseSections turns -only into a set; empty selects every section the device runs.
func parseSections(only, dev string) (map[string]bool, error) {
	avail, sel := sections, map[string]bool{}
	if dev != "cpu" {
		avail = deviceSections
	}
	want := avail
	if only != "" {
		want = strings.Split(strings.ToLower(strings.ReplaceAll(only, " ", "")), ",")
	}
	for _, s := range want {
		if !slices.Contains(sections, s) {
			return nil, fmt.Errorf("-only: unknown section %q (sections: %s)", s, strings.Join(sections, ", "))
		} else if !slices.Contains(avail, s) {
			return nil, fmt.Errorf("-only: section %q runs on the CPU only; -device %s runs %s",
				s, dev, strings.Join(avail, ", "))
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

	be     backend.Backend
	model  *gpt2.Model
	rows   []Row
	failed []string
	peer   *torchInfo // what the first PyTorch peer reported of its kernels
	best   sampler    // the fastest product kernel: the floors' rate
	mem    sampler    // the memory bandwidth the floors take
	train  series     // the engine's train step, for llm.c's speed-up
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
