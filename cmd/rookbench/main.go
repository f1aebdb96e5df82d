// Command rookbench measures the rookscript engine against its peers on this machine, all in
// one command, and prints one table.
//
// What it measures (select with -only, default all):
//
//	gemm         the ceiling: OpenBLAS SGEMM on a 768×3072×768 product (out 768×3072, inner
//	             768) through the cpu backend's MatMul, in GFLOP/s: on one thread (one
//	             single-threaded OpenBLAS call), as the backend runs every GEMM (its pool of
//	             -threads workers cuts the product into one part per worker, OpenBLAS
//	             single-threaded in each), and, for reference, one call on OpenBLAS's own threads
//	engine       GPT-2 124M with random weights, asked for by name (random:124m@seed=42), at
//	             B=4, T=64: Forward (LM head and log-softmax on all 256 rows) and a train step
//	             as the engine trains (ZeroGrads, ForwardBackward of the mean cross-entropy,
//	             AdamW), ms and GFLOP/s
//	torch        the same in PyTorch CPU: bench/torch_gpt2.py, a nanoGPT-style GPT-2 run by
//	             Debian's python3-torch (-python), torch.set_num_threads(-threads),
//	             OMP_WAIT_POLICY=PASSIVE in its environment
//	untuned      the same PyTorch without OMP_WAIT_POLICY (-untuned-runs runs), so that the
//	             effect of the tuning shows; every ratio uses the tuned figure
//	llmc         llm.c's CPU trainer, only when LLMC_DIR names an llm.c checkout with a built
//	             train_gpt2 (and its gpt2_124M.bin and data); rookbench never downloads or builds it
//	gen          KV-cache generation at the rollout shapes, 8 prompts × 8 samples = 64
//	             sequences, 80-token prompts: Prefill of the 8 prompts, ShareSlot with the 64
//	             slots, 64 DecodeLogits steps of one token per sequence, next token = argmax of
//	             the logits (no softmax); and the real rollout path at the same shapes
//	             (rollout.Sampler.Generate, sampled at T=1, logprobs recorded, 64 new tokens =
//	             63 decode steps); on the CPU, the decode steps of 64 and 8 rows again by phase
//	             (phases.go); on the CPU its rounds also sample the SGEMM rate and the
//	             memory bandwidth that its decode steps' floors take
//	torchgen     the same greedy generation in PyTorch (bench/torch_generate.py): a
//	             past_key_values cache grown by torch.cat, one decode step = one forward of 64
//	             new tokens
//	torchstatic  the same with a preallocated cache written in place: the stronger PyTorch
//	             decode here, where every torch.cat of the growing cache is a fresh allocation
//	             that the kernel must fault in
//	grpo         one full GRPO step of the engine at the same shapes (β = 0.02, so the reference
//	             model runs), split by phase: rollout, reference forward, update (at most 3 timed
//	             steps, so that their median passes over one disturbed step: one takes about
//	             35 s on two cores); on the CPU the SGEMM rate and the memory bandwidth that
//	             its floors take are sampled before each step
//	mem          peak resident memory against the analytic size (gpt2.Footprint) for the GRPO
//	             step of the main job on the default model's architecture, the default model's
//	             SFT step and the GRPO step of GPT-2 124M, each in a child process of its own
//	             (rookbench -mem-case), and the main job itself (bin/rookscript
//	             recipes/grpo_stable.lua steps=2, its rusage peak; needs the cached default model)
//
// Engine and PyTorch runs alternate: PyTorch runs as a server process (the scripts' --serve
// mode) that times one op per request, so run i of the engine and run i of PyTorch see nearly
// the same load from the rest of the machine. Each measurement has -warmup untimed rounds,
// then -runs timed ones (-gen-runs for the generation sections, where one run is already 64
// decode steps).
//
// Reading the table: a row is the median of its timed runs, with the fastest and slowest run
// beside it (min and max in the row's own unit: for GFLOP/s and tok/s, max is the best run).
// GFLOP/s is achieved at the median time, FLOPs counted as llm.c counts them (the header gives
// the formula). "cores (sys)" is the median over runs of the process's CPU time per wall
// second, all threads, and its system-time part: about -threads when the run had the machine
// to itself (spinning threads count too), less when other work took the cores, and a large
// sys share means time in the kernel, page faults mostly. A ratio row ("x") is an engine
// speed-up, above 1 when the engine is faster (the peer's time over the engine's, or the
// engine's tokens/s over the peer's): for alternated runs the median of the per-pair ratios
// with the extreme pairs as min and max; otherwise the ratio of the medians with the extreme
// ratios any two runs give. Rows that could not be measured say why. The notes under the table
// put the engine's train step and decode step against the GEMM floor (their matrix products
// at the measured pool SGEMM rate) and flag anything that makes a comparison unfair.
//
// The machine is shared and small: compare rows of one command with each other, not with
// another command's, and read the load averages in the header. -json prints the same report
// as one JSON object, per-run samples included.
//
// Usage:
//
//	rookbench [-runs 5] [-warmup 1] [-threads N] [-only gemm,engine,…] [-json]
//	          [-untuned-runs 3] [-gen-runs 3] [-python /usr/bin/python3] [-scripts bench]
//	          [-cpuprofile file]
package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/gpt2"
)

// modelSpec names the benchmark model: GPT-2 124M, random weights, llm.c's init seed.
const modelSpec = "random:124m@seed=42"

// Train/forward shapes by default (-batch, -seq).
const benchB, benchT = 4, 64

// sections that -only selects from.
var sections = []string{"gemm", "engine", "torch", "untuned", "llmc", "gen", "torchgen", "torchstatic", "grpo", "dp", "mem"}

// deviceSections are those that run on a GPU (-device cuda).
var deviceSections = []string{"gemm", "engine", "gen", "grpo"}

// settle is the pause between alternated runs of different processes, long enough for the
// previous one's BLAS threads to stop spinning and go to sleep.
const settle = 200 * time.Millisecond

// progress reports what is being measured, on stderr.
func progress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
}

func main() {
	runs := flag.Int("runs", 5, "timed runs per measurement (medians over these)")
	warmup := flag.Int("warmup", 1, "untimed warm-up runs before the timed ones")
	threads := flag.Int("threads", runtime.NumCPU(), "threads for the engine's pool, torch.set_num_threads and llm.c's OMP_NUM_THREADS")
	only := flag.String("only", "", "comma list of sections to run: "+strings.Join(sections, ",")+" (default all)")
	asJSON := flag.Bool("json", false, "print the report as JSON instead of a table")
	untunedRuns := flag.Int("untuned-runs", 3, "timed runs of the untuned PyTorch figures")
	genRuns := flag.Int("gen-runs", 3, "timed generations in the gen, torchgen and torchstatic sections")
	python := flag.String("python", envOr("PYTHON", "/usr/bin/python3"), "Python with torch (Debian's python3-torch); $PYTHON when set")
	scripts := flag.String("scripts", "", "directory holding torch_gpt2.py and torch_generate.py (default: bench/ of the enclosing repository)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of this process (the engine's work) to this file")
	dev := flag.String("device", "cpu", "the engine's backend: cpu, or cuda (a binary built with -tags cuda; sections gemm, engine, gen and grpo)")
	batch := flag.Int("batch", benchB, "sequences in the forward and train step's batch (B)")
	seq := flag.Int("seq", benchT, "tokens per sequence in the forward and train step (T)")
	dpRank := flag.Bool("dp-child", false, "run as one rank of the dp section's mpirun (the dp section's child processes)")
	memCase := flag.String("mem-case", "", "run one case of the mem section in this process and print it as JSON (the mem section's child processes)")
	flag.Parse()
	if *dpRank {
		if err := dpChild(*runs, *warmup); err != nil {
			fail(err)
		}
		return
	}
	if *memCase != "" {
		runtime.GOMAXPROCS(*threads)
		if err := runMemCase(*memCase, *threads); err != nil {
			fail(err)
		}
		return
	}
	if flag.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments %q", flag.Args()))
	}
	if *runs < 1 || *warmup < 0 || *threads < 1 || *untunedRuns < 1 || *genRuns < 1 || *batch < 1 || *seq < 1 {
		fail(errors.New("-runs, -threads, -untuned-runs, -gen-runs, -batch and -seq must be at least 1, -warmup at least 0"))
	}
	sel, err := parseSections(*only, *dev)
	if err != nil {
		fail(err)
	}
	if *scripts == "" {
		*scripts = findScripts()
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	runtime.GOMAXPROCS(*threads)

	b := &bench{runs: *runs, warmup: *warmup, threads: *threads, untunedRuns: *untunedRuns, genRuns: *genRuns,
		python: *python, scripts: *scripts, sel: sel, llmcDir: os.Getenv("LLMC_DIR"),
		device: *dev, batch: *batch, seq: *seq, devPeak: map[string]int64{}}
	rep := b.run()
	if *asJSON {
		if err := rep.WriteJSON(os.Stdout); err != nil {
			fail(err)
		}
	} else {
		rep.WriteTable(os.Stdout)
	}
	if len(b.failed) > 0 {
		progress("rookbench: %d measurement(s) failed: %s", len(b.failed), strings.Join(b.failed, "; "))
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "rookbench:", err)
	os.Exit(2)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// parseSections turns -only into a set; empty selects every section the device runs. On a
// GPU only the engine's own sections run: the peers here are CPU programs.
func parseSections(only, dev string) (map[string]bool, error) {
	avail := sections
	if dev != "cpu" {
		avail = deviceSections
	}
	sel := map[string]bool{}
	if strings.TrimSpace(only) == "" {
		for _, s := range avail {
			sel[s] = true
		}
		return sel, nil
	}
	for _, s := range strings.Split(only, ",") {
		s = strings.ToLower(strings.TrimSpace(s))
		if !slices.Contains(sections, s) {
			return nil, fmt.Errorf("-only: unknown section %q (sections: %s)", s, strings.Join(sections, ", "))
		}
		if !slices.Contains(avail, s) {
			return nil, fmt.Errorf("-only: section %q runs on the CPU only; -device %s runs %s", s, dev, strings.Join(avail, ", "))
		}
		sel[s] = true
	}
	return sel, nil
}

// findScripts is the bench/ directory of the repository around the working directory.
func findScripts() string {
	dir, err := os.Getwd()
	if err != nil {
		return "bench"
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "bench", "torch_gpt2.py")); err == nil {
			return filepath.Join(dir, "bench")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "bench"
		}
		dir = parent
	}
}

// contender is one side of an alternated measurement.
type contender struct {
	name   string
	run    func() (sample, error) // nil: not selected
	repeat int                    // runs in each round (0: one)
	runs   []sample               // timed runs
	err    error
}

// series is the contender's timed runs as value(run), or why it has none.
func (c *contender) series(value func(sample) float64) series {
	if c.err != nil {
		return skipped(c.err.Error())
	}
	return fromRuns(c.runs, value)
}

// collect runs a garbage collection before a timed run, as Go's testing package does before
// each benchmark, so that no collection the setup's allocations left due runs inside it: in a
// run of -only gen, one did, for 1.2 s of the 64-row decode phase runs (GODEBUG=gctrace=1),
// its mark workers on the processor the pool's helper left idle between calls.
func collect() { runtime.GC() }

// alternate runs the selected contenders in turn, one run each per round (or its repeat):
// warmup untimed rounds, then runs timed ones, each after a collection (collect). A contender
// that fails drops out with its error.
func alternate(what string, warmup, runs int, cs ...*contender) {
	var active []*contender
	for _, c := range cs {
		if c.run != nil && c.err == nil {
			active = append(active, c)
		}
	}
	for round := range warmup + runs {
		label := "warm-up"
		if round >= warmup {
			label = fmt.Sprintf("%d/%d", round-warmup+1, runs)
		}
		for i, c := range active {
			for r := range max(1, c.repeat) {
				if c.err != nil {
					break
				}
				collect()
				if i > 0 || r > 0 {
					time.Sleep(settle)
				}
				s, err := timed(c.run)
				if err != nil {
					c.err = err
					progress("  %s %s: %s failed: %v", what, label, c.name, err)
					break
				}
				progress("  %s %s: %s %.1f ms (%.2f cores)", what, label, c.name, s.ms, s.cpu/s.ms)
				if round >= warmup {
					c.runs = append(c.runs, s)
				}
			}
		}
	}
}

// bench is one rookbench command: its settings and what it measured.
type bench struct {
	runs, warmup, threads, untunedRuns, genRuns int
	python, scripts, llmcDir                    string
	sel                                         map[string]bool
	device                                      string // -device: cpu or cuda
	batch, seq                                  int    // B and T of the forward and train step

	failed []string // measurements that ended in an error

	be        backend.Backend // the engine's (backend)
	model     *gpt2.Model
	src       gpt2.Source
	torchInfo []torchInfo // of every PyTorch process started

	gemm                 gemmResults
	engFwd, engTrain     series
	fwdRate, trainRate   series // the floors' SGEMM rate in the forward's and train step's rounds (CPU)
	allocs, loss         float64
	torFwd, torTrain     series
	untFwd, untTrain     series
	llmc                 series
	genPrefill, genDec   series                  // engine greedy generation, ms
	gen8Dec              series                  // the same for 8 sequences (1 prompt × 8), decode ms
	genPhases            map[string]decodePhases // a decode step by phase, per decode key ("", "8")
	genBandwidth         series                  // the memory read bandwidth sampled in the generation rounds (CPU), GB/s
	genRate              series                  // the floors' SGEMM rate sampled in the generation rounds (CPU), GFLOP/s
	grpoRate             series                  // the floors' SGEMM rate sampled beside the GRPO steps (CPU), GFLOP/s
	grpoBandwidth        series                  // the memory read bandwidth sampled beside the GRPO steps (CPU), GB/s
	rateSampler          *gemmSampler            // the floors' SGEMM rate, one sampler for every section (floorRateSampler)
	bwSampler            *bandwidthSampler       // the memory read bandwidth, likewise (floorBandwidthSampler)
	genTotal             series                  // ms of the whole generation
	sampler              series                  // rollout.Sampler, tok/s
	samplerSteps         int
	catPrefill, catDec   series
	catTotal             series
	statPrefill, statDec series
	statTotal            series
	grpo                 grpoPhases
	dp                   dpResult
	torchCap             struct { // the tuned peer's operator kernels (torchCapability)
		chosen bool
		value  string
		tried  []string
	}
	memRuns map[string]memRun
	main    mainJob
	devPeak map[string]int64 // -device cuda: the most device memory each section held
}

// failure records a failed measurement and returns it as a not-measured series.
func (b *bench) failure(what string, err error) series {
	b.failed = append(b.failed, what+": "+err.Error())
	progress("rookbench: %s: %v", what, err)
	return skipped(err.Error())
}

// record turns a contender's runs into a series, recording its failure if it failed.
func (b *bench) record(c *contender, value func(sample) float64) series {
	if c.err != nil {
		return b.failure(c.name, c.err)
	}
	return c.series(value)
}

func wallMS(s sample) float64 { return s.ms }

// run measures the selected sections and builds the report.
func (b *bench) run() *Report {
	start := time.Now()
	load := loadAvg()
	var order []string
	for _, s := range sections {
		if b.sel[s] {
			order = append(order, s)
		}
	}
	progress("rookbench: %s; %d threads, %d runs after %d warm-up", strings.Join(order, ", "), b.threads, b.runs, b.warmup)
	if b.sel["gemm"] {
		b.runGEMM()
	}
	if b.sel["engine"] || b.sel["torch"] {
		b.section("engine", b.runSteps)
	}
	if b.sel["untuned"] {
		b.runUntuned()
	}
	if b.sel["llmc"] {
		b.runLLMC()
	}
	if b.sel["gen"] || b.sel["torchgen"] || b.sel["torchstatic"] {
		b.section("gen", b.runGen)
	}
	if b.sel["grpo"] {
		b.section("grpo", b.runGRPO)
	}
	if b.sel["dp"] {
		b.runDP()
	}
	if b.sel["mem"] {
		b.runMem()
	}
	return b.report(start, load, strings.Join(order, ","))
}

func (b *bench) runGEMM() {
	progress("== SGEMM ceiling")
	runtime.GC()
	measure := measureGEMM
	if b.device != "cpu" {
		measure = b.measureDeviceGEMM
	}
	g, err := measure(b.threads, b.warmup, b.runs)
	if err != nil {
		g.single = b.failure("gemm", err)
	}
	b.gemm = g
}

// loadModel builds the engine model once.
func (b *bench) loadModel() error {
	if b.model != nil {
		return nil
	}
	t := time.Now()
	be, err := b.backend()
	if err != nil {
		return err
	}
	m, src, err := loadModel(be)
	if err != nil {
		return err
	}
	b.model, b.src = m, src
	progress("  engine: %s, ready in %.1f s", src.Description, time.Since(t).Seconds())
	return nil
}

// startTorch starts a PyTorch script in serve mode with the common arguments: tuned, at its
// best on this machine (torchPeer), or as the environment has it.
func (b *bench) startTorch(script string, tuned bool, args ...string) (*torchProc, error) {
	peer := torchPeer{}
	if tuned {
		peer = torchPeer{tuned: true, coreType: cpu.BLASCoreName(), capability: b.torchCapability(), capped: cpu.Capped()}
	}
	p, err := b.startTorchPeer(script, peer, args...)
	if err != nil {
		return nil, err
	}
	b.torchInfo = append(b.torchInfo, p.Info)
	return p, nil
}

func (b *bench) startTorchPeer(script string, peer torchPeer, args ...string) (*torchProc, error) {
	args = append([]string{"--threads", fmt.Sprint(b.threads), "--seed", "42"}, args...)
	p, err := startTorch(b.python, filepath.Join(b.scripts, script), peer, args...)
	if err != nil {
		return nil, err
	}
	progress("  torch %s (OMP_WAIT_POLICY=%q): %d threads, BLAS %s kernels, operators %s, ready in %.1f s",
		p.Info.Torch, p.Info.OMPWaitPolicy, p.Info.Threads, p.Info.BLASCore, p.Info.Capability, p.Info.InitS)
	return p, nil
}

// torchCapability is the kernels torch's own operators run fastest here, chosen once: on a
// processor with AVX-512, its AVX2 and AVX-512 kernels each time a few forwards and the faster
// wins (torch picks AVX2 by default, which on some processors is the faster). "" where there
// is nothing to choose, or the choice could not be made.
func (b *bench) torchCapability() string {
	if cpu.Capped() {
		// The engine runs as a processor without AVX-512 would: so does the peer.
		return "AVX2"
	}
	if b.torchCap.chosen || !cpuHas("avx512f") {
		return b.torchCap.value
	}
	b.torchCap.chosen = true
	progress("  choosing torch's operator kernels: AVX2 or AVX-512, %d forwards each", b.runs)
	best, bestMS := "", math.Inf(1)
	for _, c := range []string{"AVX2", "AVX512"} {
		p, err := b.startTorchPeer("torch_gpt2.py", torchPeer{tuned: true, coreType: cpu.BLASCoreName(), capability: c},
			"--batch", fmt.Sprint(b.batch), "--seq", fmt.Sprint(b.seq))
		if err != nil {
			progress("  torch with %s: %v", c, err)
			continue
		}
		if got := p.Info.Capability; got != "" && !strings.EqualFold(got, c) {
			// A build without the kernels asked for runs its best other ones: nothing to choose.
			p.Close()
			b.torchCap.tried = append(b.torchCap.tried, fmt.Sprintf("%s asked, torch runs %s (its build has no %s kernels)", c, got, c))
			continue
		}
		var ms []float64
		for i := range 1 + b.runs {
			s, err := p.Do("forward")
			if err != nil {
				break
			}
			if i > 0 {
				ms = append(ms, s.ms)
			}
		}
		p.Close()
		if len(ms) == 0 {
			continue
		}
		m := median(ms)
		b.torchCap.tried = append(b.torchCap.tried, fmt.Sprintf("%s %.1f ms", c, m))
		if m < bestMS {
			best, bestMS = c, m
		}
	}
	b.torchCap.value = best
	return best
}

// cpuHas reports whether the processor has a feature (a flag of /proc/cpuinfo).
func cpuHas(flag string) bool {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "flags") {
			return slices.Contains(strings.Fields(line), flag)
		}
	}
	return false
}

// runSteps alternates the engine's and tuned PyTorch's forward, then their train steps.
func (b *bench) runSteps() {
	progress("== GPT-2 124M forward and train step, B=%d T=%d", b.batch, b.seq)
	runtime.GC()
	engF := &contender{name: "engine forward"}
	engT := &contender{name: "engine train step"}
	torF := &contender{name: "torch forward"}
	torT := &contender{name: "torch train step"}
	var steps *engineSteps
	if b.sel["engine"] {
		err := b.loadModel()
		if err == nil {
			steps, err = newEngineSteps(b.model, b.batch, b.seq)
		}
		if err != nil {
			engF.err, engT.err = err, err
		} else {
			engF.run, engT.run = plain(steps.forward), plain(steps.train)
		}
	}
	if b.sel["torch"] {
		p, err := b.startTorch("torch_gpt2.py", true, "--batch", fmt.Sprint(b.batch), "--seq", fmt.Sprint(b.seq))
		if err != nil {
			torF.err, torT.err = err, err
		} else {
			defer p.Close()
			torF.run = func() (sample, error) { return p.Do("forward") }
			torT.run = func() (sample, error) { return p.Do("train") }
		}
	}
	// On the CPU a sample of the floors' SGEMM rate runs in every round beside the engine, so
	// that engine / floor divides two figures taken under the same load.
	floorF, floorT := &contender{name: "SGEMM floor rate"}, &contender{name: "SGEMM floor rate"}
	var floor *gemmSampler
	if steps != nil && b.device == "cpu" {
		floor = b.floorRateSampler()
		floorF.run = func() (sample, error) { return floor.sample(), nil }
		floorT.run = floorF.run
	}
	alternate("forward", b.warmup, b.runs, engF, torF, floorF)
	alternate("train step", b.warmup, b.runs, engT, torT, floorT)
	if floor != nil {
		b.fwdRate, b.trainRate = floorF.series(floor.rate), floorT.series(floor.rate)
	}
	if b.sel["engine"] {
		b.engFwd, b.engTrain = b.record(engF, wallMS), b.record(engT, wallMS)
		if steps != nil && engT.err == nil {
			b.loss = steps.loss
			var err error
			if b.allocs, err = steps.allocsPerStep(); err != nil {
				b.engTrain = b.failure("engine train step", err)
			}
		}
	}
	if b.sel["torch"] {
		b.torFwd, b.torTrain = b.record(torF, wallMS), b.record(torT, wallMS)
	}
}

// runUntuned measures PyTorch without OMP_WAIT_POLICY, on its own.
func (b *bench) runUntuned() {
	progress("== PyTorch untuned (OMP_WAIT_POLICY unset)")
	runtime.GC()
	f := &contender{name: "untuned torch forward"}
	t := &contender{name: "untuned torch train step"}
	p, err := b.startTorch("torch_gpt2.py", false, "--batch", fmt.Sprint(b.batch), "--seq", fmt.Sprint(b.seq))
	if err != nil {
		f.err, t.err = err, err
	} else {
		defer p.Close()
		f.run = func() (sample, error) { return p.Do("forward") }
		t.run = func() (sample, error) { return p.Do("train") }
	}
	alternate("forward", b.warmup, b.untunedRuns, f)
	alternate("train step", b.warmup, b.untunedRuns, t)
	b.untFwd, b.untTrain = b.record(f, wallMS), b.record(t, wallMS)
}

func (b *bench) runLLMC() {
	progress("== llm.c")
	s, err := runLLMC(b.llmcDir, b.threads, b.warmup, b.runs)
	if err != nil {
		s = b.failure("llm.c", err)
	} else if !s.ok() {
		progress("  not measured: %s", s.reason)
	}
	b.llmc = s
}

// gen8Repeat is the 8-row generations, and the bandwidth reads and SGEMM rate samples beside
// them, in each round of the generation section (and the samples before each GRPO step). One
// takes about 1.4 s, against 8 s for the 64-row one, and on the project's shared machine the
// steps of one 8-row generation took from 18.8 to 26 ms against those of the one before it
// (runs in a row, nothing else running): the median takes more. A floor takes its section's
// samples (sectionFloors), so one sample of the rate per round was too few: in a run here two
// of the three before the GRPO steps were slowed (their median 126.5 GFLOP/s, the third
// 175.9), and the steps came out at 0.79 of a floor that loose.
const gen8Repeat = 3

// runGen alternates the engine's greedy generation, PyTorch's with each cache and the engine's
// rollout sampler.
func (b *bench) runGen() {
	progress("== KV-cache generation, %d×%d sequences, %d-token prompts, %d new tokens", genPrompts, genGroup, genPromptLen, genNew)
	runtime.GC()
	eng := &contender{name: "engine greedy"}
	eng8 := &contender{name: "engine greedy, 8 rows", repeat: gen8Repeat}
	smp := &contender{name: "engine rollout.Sampler"}
	cat := &contender{name: "torch (torch.cat cache)"}
	stat := &contender{name: "torch (static cache)"}
	bw := &contender{name: "memory read bandwidth", repeat: gen8Repeat}
	rate := &contender{name: "SGEMM floor rate", repeat: gen8Repeat}
	if b.sel["gen"] {
		err := b.loadModel()
		if err == nil && b.device == "cpu" {
			// The decode floors' rates, sampled beside the steps they bound (sectionFloors).
			bs, gs := b.floorBandwidthSampler(), b.floorRateSampler()
			bw.run = func() (sample, error) { return bs.sample(), nil }
			rate.run = func() (sample, error) { return gs.sample(), nil }
		}
		var g *engineGen
		if err == nil {
			g, err = newEngineGen(b.model, b.threads, genPrompts, genGroup)
		}
		var g8 *engineGen
		if err == nil {
			g8, err = newEngineGen(b.model, b.threads, 1, genGroup)
		}
		if err != nil {
			eng.err, smp.err, eng8.err = err, err, err
		} else {
			eng.run, smp.run, eng8.run = g.once, newEngineSampler(b.model).once, g8.once
		}
	}
	if b.sel["torchgen"] || b.sel["torchstatic"] {
		p, err := b.startTorch("torch_generate.py", true, "--prompts", fmt.Sprint(genPrompts),
			"--group", fmt.Sprint(genGroup), "--prompt-len", fmt.Sprint(genPromptLen), "--new", fmt.Sprint(genNew))
		if err != nil {
			cat.err, stat.err = err, err
		} else {
			defer p.Close()
			if b.sel["torchgen"] {
				cat.run = func() (sample, error) { return p.Do("gen:cat") }
			}
			if b.sel["torchstatic"] {
				stat.run = func() (sample, error) { return p.Do("gen:static") }
			}
		}
	}
	alternate("generation", b.warmup, b.genRuns, eng, cat, stat, smp, eng8, bw, rate)
	if b.sel["gen"] && b.device == "cpu" && eng.err == nil {
		b.genPhases = map[string]decodePhases{}
		for _, d := range []struct {
			key     string
			prompts int
		}{{"", genPrompts}, {"8", 1}} {
			progress("  decode step by phase, %d rows, each call timed: %d runs", d.prompts*genGroup, b.warmup+b.genRuns)
			p, err := measureDecodePhases(b.model, b.threads, d.prompts, genGroup, b.warmup, b.genRuns)
			if err != nil {
				b.failure("decode phases", err)
				continue
			}
			b.genPhases[d.key] = p
		}
	}
	if bw.run != nil {
		b.genBandwidth, b.genRate = bw.series(gbps), rate.series(b.rateSampler.rate)
	}
	prefill := func(s sample) float64 { return s.prefill }
	decode := func(s sample) float64 { return s.decode }
	if b.sel["gen"] {
		b.genPrefill, b.genDec, b.genTotal = b.record(eng, prefill), eng.series(decode), eng.series(wallMS)
		b.gen8Dec = b.record(eng8, decode)
		b.sampler = b.record(smp, func(s sample) float64 { return s.tokPerS })
		if smp.err == nil && len(smp.runs) > 0 {
			b.samplerSteps = smp.runs[len(smp.runs)-1].steps
		}
	}
	if b.sel["torchgen"] {
		b.catPrefill, b.catDec, b.catTotal = b.record(cat, prefill), cat.series(decode), cat.series(wallMS)
	}
	if b.sel["torchstatic"] {
		b.statPrefill, b.statDec, b.statTotal = b.record(stat, prefill), stat.series(decode), stat.series(wallMS)
	}
}

// report builds the header, the rows of the selected sections, and the notes.
func (b *bench) report(start time.Time, loadBefore, order string) *Report {
	cfg := gpt2.RookWorld124M
	n := gpt2.NewLayout(cfg).Total
	L, C := cfg.NumLayers, cfg.Channels
	tokens := b.batch * b.seq
	trainFLOP := float64(tokens) * float64(6*n+6*L*C*b.seq)
	fwdFLOP := float64(tokens) * float64(2*n+2*L*C*b.seq)
	// A decode step: one token per sequence through every weight (2·N) plus attention over its
	// context, 4·L·C FLOPs per position (q·k and p·v); the context runs from 81 to 144.
	meanCtx := float64(genPromptLen) + float64(genNew+1)/2
	decodeFLOP := float64(genPrompts*genGroup) * (2*float64(n) + 4*float64(L*C)*meanCtx)
	genTokens := float64(genPrompts * genGroup * genNew)

	torchV := ""
	for _, ti := range b.torchInfo {
		torchV = ti.Torch
	}
	rep := &Report{Meta: Meta{
		Threads: b.threads, Runs: b.runs, Warmup: b.warmup, Sections: order,
		Model: modelSpec, Params: n, Batch: b.batch, Seq: b.seq, Device: b.deviceName(),
		ForwardGFLOP: fwdFLOP / 1e9, TrainGFLOP: trainFLOP / 1e9,
		FLOPFormula: "train step: B·T·(6·N + 6·L·C·T); forward: B·T·(2·N + 2·L·C·T) (llm.c's count)",
		GoVersion:   runtime.Version(), BLAS: strings.TrimSpace(cpu.BLASConfig()), CPU: cpuName(), HugePages: cmp.Or(cpu.HugePageMode(), "none"), CPUIdle: cpuIdle("/"),
		Kernels: cpu.Capability(),
		Torch:   torchV, LoadAvgBefore: loadBefore, LoadAvgAfter: loadAvg(),
		Started: start.Format(time.RFC3339), Seconds: time.Since(start).Seconds(),
	}}
	m := rep.Meta
	torchLine := ""
	if torchV != "" {
		torchLine = "; torch " + torchV
	}
	rep.Header = []string{
		fmt.Sprintf("rookbench: GPT-2 124M, RANDOM weights (%s); %d threads for each side (engine pool, torch.set_num_threads, llm.c OMP_NUM_THREADS)", modelSpec, b.threads),
		fmt.Sprintf("medians of %d timed runs after %d warm-up (untuned torch %d, generation %d, of 8 rows %d), engine and PyTorch runs alternated; x rows: engine speed-up, >1 = engine faster", b.runs, b.warmup, b.untunedRuns, b.genRuns, b.genRuns*gen8Repeat),
		fmt.Sprintf("machine: %s, %d CPUs; %s; %s%s; transparent huge pages: %s (the engine's large buffers advised, peers' malloc through %s)", m.CPU, runtime.NumCPU(), m.GoVersion, m.BLAS, torchLine, m.HugePages, hugeMallocTunable),
	}
	if m.CPUIdle != "" {
		rep.Header[2] += "; idle CPUs: " + m.CPUIdle
	}
	if k := b.kernelsLine(); k != "" {
		rep.Header = append(rep.Header, k)
	}
	if b.device != "cpu" {
		rep.Header[0] = fmt.Sprintf("rookbench: GPT-2 124M, RANDOM weights (%s), on %s", modelSpec, m.Device)
		rep.Header[1] = fmt.Sprintf("medians of %d timed runs after %d warm-up (generation %d); each timed run ends when the device has finished its work", b.runs, b.warmup, b.genRuns)
		rep.Header[2] = fmt.Sprintf("host: %s, %d CPUs; %s", m.CPU, runtime.NumCPU(), m.GoVersion)
	}
	rep.Header = append(rep.Header,
		fmt.Sprintf("load average (1, 5, 15 min): %s before, %s after; %.0f s in all; a shared machine makes every figure noisy", m.LoadAvgBefore, m.LoadAvgAfter, m.Seconds),
		fmt.Sprintf("FLOPs as llm.c counts them: train step = B·T·(6·N + 6·L·C·T) = %.1f GFLOP, forward = B·T·(2·N + 2·L·C·T) = %.1f GFLOP,", trainFLOP/1e9, fwdFLOP/1e9),
		fmt.Sprintf("  N = %d parameters (tied wte counted once, vocabulary %d unpadded), L = %d, C = %d, T = %d, B·T = %d; decode step = %d·(2·N + 4·L·C·p), p = mean context %.1f", n, cfg.VocabSize, L, C, b.seq, tokens, genPrompts*genGroup, meanCtx),
	)

	var rows []Row
	add := func(r Row) { rows = append(rows, r) }
	var cacheNote []string
	s := b.sel
	if s["gemm"] && b.device != "cpu" {
		b.deviceGEMMRows(add)
	} else if s["gemm"] {
		gr := "SGEMM 768×3072×768 through OpenBLAS on the cpu backend's pool (the ceiling), the memory bandwidth, and the forward's own products"
		add(valueRow(gr, "gemm.single", "1 thread: one single-threaded OpenBLAS call", "GFLOP/s", b.gemm.single, 0))
		add(valueRow(gr, "gemm.pool", fmt.Sprintf("backend pool of %d workers, OpenBLAS single-threaded in each: the floors' rate", b.threads), "GFLOP/s", b.gemm.pool, 0))
		add(valueRow(gr, "gemm.openblas_threads", fmt.Sprintf("one call on OpenBLAS's own %d threads (reference)", b.threads), "GFLOP/s", b.gemm.blasThreads, 0))
		add(valueRow(gr, "mem.bandwidth", fmt.Sprintf("memory read bandwidth, %d threads over 1 GiB", b.threads), "GB/s", b.gemm.bandwidth, 0))
		add(valueRow(gr, "gemm.forward", "the same product through MatMul (gemm_small.c, batch-invariant: the forward's)", "GFLOP/s", b.gemm.forward, 0))
		add(ratioRow(gr, "gemm.forward_vs_floor", "  floor rate / MatMul rate", "≤ 1.2 wanted", b.gemm.pool, b.gemm.forward, false))
		add(valueRow(gr, "gemm.pool_proj", "768×3072 · 3072×768 (the MLP's down projection) through OpenBLAS on the pool", "GFLOP/s", b.gemm.poolProj, 0))
		add(valueRow(gr, "gemm.forward_proj", "the same through MatMul", "GFLOP/s", b.gemm.forwardProj, 0))
		add(ratioRow(gr, "gemm.forward_proj_vs_floor", "  OpenBLAS rate / MatMul rate", "≤ 1.2 wanted", b.gemm.poolProj, b.gemm.forwardProj, false))
	}
	if s["engine"] || s["torch"] || s["untuned"] {
		gr := fmt.Sprintf("GPT-2 124M forward, B=%d T=%d, LM head + log-softmax on all %d rows (%.1f GFLOP)", b.batch, b.seq, tokens, fwdFLOP/1e9)
		if s["engine"] {
			add(valueRow(gr, "engine.forward", "engine Forward", "ms", b.engFwd, fwdFLOP))
		}
		if s["torch"] {
			add(valueRow(gr, "torch.forward", "torch, no_grad, OMP_WAIT_POLICY=PASSIVE", "ms", b.torFwd, fwdFLOP))
		}
		if s["untuned"] {
			add(valueRow(gr, "torch_untuned.forward", "torch, untuned (OMP_WAIT_POLICY unset)", "ms", b.untFwd, fwdFLOP))
		}
		if s["engine"] && s["torch"] {
			add(ratioRow(gr, "speedup.forward_vs_torch", "engine speed-up over tuned torch", "torch ms / engine ms", b.torFwd, b.engFwd, true))
		}
		if s["engine"] {
			b.gemmFloorRows(gr, "forward", 2*float64(n)*float64(tokens), b.engFwd, b.fwdRate, add)
		}
		if s["torch"] && s["untuned"] {
			add(ratioRow(gr, "torch.forward_tuning_gain", "torch: PASSIVE tuning gain", "untuned ms / tuned ms", b.untFwd, b.torFwd, false))
		}
	}
	trainGroup := fmt.Sprintf("GPT-2 124M train step (forward + backward + AdamW), B=%d T=%d (%.1f GFLOP)", b.batch, b.seq, trainFLOP/1e9)
	if s["engine"] {
		r := valueRow(trainGroup, "engine.train_step", "engine ZeroGrads+ForwardBackward+AdamW", "ms", b.engTrain, trainFLOP)
		if b.engTrain.ok() {
			r.Note = fmt.Sprintf("%.0f heap allocs in a steady-state step", b.allocs)
		}
		add(r)
	}
	if s["torch"] {
		add(valueRow(trainGroup, "torch.train_step", "torch, OMP_WAIT_POLICY=PASSIVE", "ms", b.torTrain, trainFLOP))
	}
	if s["untuned"] {
		add(valueRow(trainGroup, "torch_untuned.train_step", "torch, untuned (OMP_WAIT_POLICY unset)", "ms", b.untTrain, trainFLOP))
	}
	if s["llmc"] {
		add(valueRow(trainGroup, "llmc.train_step", "llm.c train_gpt2 (CPU), its own step timer", "ms", b.llmc, trainFLOP))
	}
	if s["engine"] && s["torch"] {
		add(ratioRow(trainGroup, "speedup.train_vs_torch", "engine speed-up over tuned torch", "torch ms / engine ms", b.torTrain, b.engTrain, true))
	}
	if s["engine"] {
		b.gemmFloorRows(trainGroup, "train", 6*float64(n)*float64(tokens), b.engTrain, b.trainRate, add)
	}
	if s["torch"] && s["untuned"] {
		add(ratioRow(trainGroup, "torch.train_tuning_gain", "torch: PASSIVE tuning gain", "untuned ms / tuned ms", b.untTrain, b.torTrain, false))
	}
	if s["engine"] && s["llmc"] {
		add(ratioRow(trainGroup, "speedup.train_vs_llmc", "engine speed-up over llm.c", "llm.c ms / engine ms", b.llmc, b.engTrain, false))
	}

	perStep := func(ms float64) float64 { return ms / genNew }
	tokPerS := func(ms float64) float64 { return genTokens / (ms / 1e3) }
	eStep, eTok := b.genDec.mapped(perStep), b.genTotal.mapped(tokPerS)
	if s["gen"] || s["torchgen"] || s["torchstatic"] {
		gr := fmt.Sprintf("KV-cache generation: %d prompts × %d samples = %d sequences, %d-token prompts, %d decode steps, greedy",
			genPrompts, genGroup, genPrompts*genGroup, genPromptLen, genNew)
		seqs := genPrompts * genGroup
		if s["gen"] {
			add(valueRow(gr, "engine.gen_prefill", fmt.Sprintf("engine Prefill %d×%d, shared with %d slots", genPrompts, genPromptLen, seqs), "ms", b.genPrefill, 0))
			add(valueRow(gr, "engine.gen_decode_step", fmt.Sprintf("engine Decode step, %d tokens (+ argmax)", seqs), "ms", eStep, decodeFLOP))
			add(valueRow(gr, "engine.gen_tokens_per_s", fmt.Sprintf("engine throughput, %d tokens incl. prefill", int(genTokens)), "tok/s", eTok, 0))
			r := valueRow(gr, "engine.rollout_tokens_per_s", fmt.Sprintf("engine rollout.Sampler, T=1 sampled, %d new tokens each", genNew), "tok/s", b.sampler, 0)
			if b.sampler.ok() {
				r.Note = fmt.Sprintf("%d decode steps; logprobs recorded", b.samplerSteps)
			}
			add(r)
			rates := b.sectionFloors(b.genRate, b.genBandwidth, "sampled in these rounds")
			if b.genBandwidth.ok() {
				add(valueRow(gr, "mem.bandwidth_gen", fmt.Sprintf("memory read bandwidth, %d threads over 1 GiB, sampled in these rounds", b.threads), "GB/s", b.genBandwidth, 0))
			}
			if b.genRate.ok() {
				add(valueRow(gr, "gemm.pool_gen", "the floors' SGEMM product on the pool, sampled in these rounds", "GFLOP/s", b.genRate, 0))
			}
			for _, d := range []struct {
				rows, prompts int
				key           string
				eng           series
			}{{seqs, genPrompts, "", eStep}, {genGroup, 1, "8", b.gen8Dec.mapped(perStep)}} {
				// Cached positions read per step: each prompt once (its samples share it), then
				// every row's own.
				cached := float64(d.prompts*genPromptLen) + float64(d.rows)*(meanCtx-genPromptLen)
				fl := decodeFloors(d.rows, cached, n, L, C, meanCtx, rates.gemm, rates.bw)
				if d.key != "" {
					add(valueRow(gr, "engine.gen_decode_step_8", fmt.Sprintf("engine Decode step, %d tokens (1 prompt × %d; + argmax)", d.rows, d.rows),
						"ms", d.eng, float64(d.rows)*(2*float64(n)+4*float64(L*C)*meanCtx)))
				}
				fr := valueRow(gr, "floor.decode_flops"+d.key, fmt.Sprintf("  floor, %d rows: GEMM FLOPs at %s", d.rows, rates.gemmName), "ms", fl.flop, 0)
				br := valueRow(gr, "floor.decode_bytes"+d.key, fmt.Sprintf("  floor, %d rows: weights + KV cache read at the memory bandwidth (%s)", d.rows, rates.bwName), "ms", fl.bytes, 0)
				br.Note = fmt.Sprintf("%.0f MB of weights, %.0f MB of cached keys and values (each prompt's once)", 4*float64(n)/1e6, cached*8*float64(L*C)/1e6)
				add(fr)
				add(br)
				floor, memoryBound := fl.flop, false
				if fl.bytes.ok() && (!fl.flop.ok() || fl.bytes.median() > fl.flop.median()) {
					floor, memoryBound = fl.bytes, true
				}
				add(ratioRow(gr, "floor.decode_ratio"+d.key, fmt.Sprintf("  engine / floor (the larger), %d rows", d.rows), "target ≤ 1.3", d.eng, floor, false))
				add(valueRow(gr, "floor.decode_phases"+d.key, fmt.Sprintf("  floor, %d rows, by phase: products + attention", d.rows), "ms", fl.phases, 0))
				add(ratioRow(gr, "floor.decode_phases_ratio"+d.key, fmt.Sprintf("  engine / floor by phase, %d rows", d.rows), "", d.eng, fl.phases, false))
				b.decodePhaseRows(gr, d.key, d.rows, fl, add)
				if memoryBound && d.eng.ok() && d.eng.median() < floor.median() {
					cacheNote = append(cacheNote, fmt.Sprintf("the decode step of %d rows ran below its memory floor, which counts every byte read from memory: "+
						"the processor's last-level cache (%s) kept part of the weights from one step to the next", d.rows, lastLevelCache()))
				}
			}
		}
		for _, peer := range []struct {
			section, key, label string
			prefill, dec, total series
		}{
			{"torchgen", "torch", "torch.cat cache", b.catPrefill, b.catDec, b.catTotal},
			{"torchstatic", "torch_static", "static cache", b.statPrefill, b.statDec, b.statTotal},
		} {
			if !s[peer.section] {
				continue
			}
			step, tok := peer.dec.mapped(perStep), peer.total.mapped(tokPerS)
			add(valueRow(gr, peer.key+".gen_prefill", fmt.Sprintf("torch (%s) prefill %d×%d, cache repeated to %d", peer.label, genPrompts, genPromptLen, seqs), "ms", peer.prefill, 0))
			add(valueRow(gr, peer.key+".gen_decode_step", fmt.Sprintf("torch (%s) decode step, %d tokens (+ argmax)", peer.label, seqs), "ms", step, decodeFLOP))
			add(valueRow(gr, peer.key+".gen_tokens_per_s", fmt.Sprintf("torch (%s) throughput, %d tokens incl. prefill", peer.label, int(genTokens)), "tok/s", tok, 0))
			if s["gen"] {
				add(ratioRow(gr, "speedup.gen_tokens_vs_"+peer.key, fmt.Sprintf("engine speed-up over torch (%s), tokens/s", peer.label), "engine tok/s / torch tok/s", eTok, tok, true))
				add(ratioRow(gr, "speedup.gen_decode_vs_"+peer.key, fmt.Sprintf("engine speed-up over torch (%s), decode step", peer.label), "torch ms / engine ms", step, eStep, true))
				add(ratioRow(gr, "speedup.rollout_vs_"+peer.key, fmt.Sprintf("rollout.Sampler speed-up over torch (%s), tokens/s", peer.label), "sampled tok/s / greedy tok/s", b.sampler, tok, true))
			}
		}
	}
	if s["grpo"] {
		b.grpoRows(add)
	}
	if s["dp"] {
		b.dpRows(add)
	}
	if s["mem"] {
		b.memRows(add)
	}
	if b.device != "cpu" {
		b.devMemRows(add)
	}
	rep.Rows = flagStepsBelowFloor(flagLooseFloors(flagDegraded(rows, b.torchInfo)), b.kernelEdge())
	proc := m.CPU
	if d := b.deviceName(); d != "" {
		proc, _, _ = strings.Cut(d, " (") // the GPU the figures are of, not the host
	} else if cpu.Capped() {
		proc += ", kernels capped at AVX2"
	}
	rep.Summary = summary(rep.Rows, proc)
	rep.Notes = append(b.notes(trainFLOP, float64(tokens)*6*float64(n), decodeFLOP, n), cacheNote...)
	return rep
}

// decodeFloors are the floors of a decode step of rows tokens, in ms: its FLOPs at the SGEMM
// rate gemm (GFLOP/s); the bytes it must read (every weight once, and the keys and values of
// cached positions) at the memory bandwidth bw (GB/s); and the sum of its two phases' floors.
// The phases are the products, bound by their FLOPs or by their weights' bytes, whichever
// takes longer, and attention, bound by the cached keys and values it reads. Each layer's
// attention needs the product before it and feeds the one after it, and on two cores that
// do not share their execution units with a second thread, a core waiting on the cache's
// bytes computes nothing meanwhile: the phases add.
func decodeFloors(rows int, cached float64, n, L, C int, meanCtx float64, gemm, bw series) decodeFloor {
	productFLOP := float64(rows) * 2 * float64(n)
	flop := productFLOP + float64(rows)*4*float64(L*C)*meanCtx
	weightBytes, cacheBytes := 4*float64(n), cached*8*float64(L*C)
	none := skipped("needs the gemm section")
	f := decodeFloor{flop: none, bytes: none, products: none, attention: none, phases: none, productFLOP: productFLOP}
	if gemm.ok() {
		f.flop = measured([]float64{flop / (gemm.median() * 1e9) * 1e3})
	}
	if bw.ok() {
		f.bytes = measured([]float64{(weightBytes + cacheBytes) / (bw.median() * 1e9) * 1e3})
		attention := cacheBytes / (bw.median() * 1e9) * 1e3
		f.attention = measured([]float64{attention})
		if gemm.ok() {
			products, _, byBytes := phaseFloor(productFLOP, weightBytes, cacheBytes, gemm.median()*1e9, bw.median()*1e9)
			f.products, f.productsByBytes = measured([]float64{products * 1e3}), byBytes
			f.phases = measured([]float64{f.products.median() + attention})
		}
	}
	return f
}

// phaseFloor is a decode step's floor by phase, in seconds, at rate FLOP/s and bw bytes/s: its
// products, bound by their FLOPs or by the weights' bytes, whichever takes longer (byBytes
// says which), then its attention, bound by the cached bytes it reads. The decode rows and the
// GRPO rollout's steps take it.
func phaseFloor(productFLOP, weightBytes, cacheBytes, rate, bw float64) (products, attention float64, byBytes bool) {
	byFLOP, byW := productFLOP/rate, weightBytes/bw
	return max(byFLOP, byW), cacheBytes / bw, byW >= byFLOP
}

// decodeFloor is a decode step's floors in ms (decodeFloors): its FLOPs, its bytes, and by
// phase: the products, attention, and their sum.
type decodeFloor struct {
	flop, bytes, products, attention, phases series
	productFLOP                              float64 // the products' FLOPs
	productsByBytes                          bool    // the products' floor is their weights' bytes at the bandwidth
}

// notes are the observations under the table.
func (b *bench) notes(trainFLOP, trainGEMMFLOP, decodeFLOP float64, params int) []string {
	var out []string
	gemm := b.floorRate()
	if f := roundFloors(trainGEMMFLOP, b.trainRate, b.engTrain); f.ok() && b.engTrain.ok() {
		out = append(out, fmt.Sprintf("GEMM floor of the train step: its weight products (6·N·B·T = %.1f of %.1f GFLOP) at %s, sampled in each of the step's rounds (median %.1f GFLOP/s); "+
			"the engine's step takes %.2fx its round's floor (median of the rounds)",
			trainGEMMFLOP/1e9, trainFLOP/1e9, b.rateName(), b.trainRate.median(), median(pairedRatios(b.engTrain, f))))
	} else if gemm.ok() && b.engTrain.ok() {
		floor := trainGEMMFLOP / (gemm.median() * 1e9) * 1e3
		out = append(out, fmt.Sprintf("GEMM floor of the train step: its weight products (6·N·B·T = %.1f of %.1f GFLOP) at %s, median %.1f GFLOP/s, take %.1f ms; "+
			"the engine's step takes %.2fx that (%.1f ms more). The ceiling was measured minutes earlier: when the load changed in between, this moves with it",
			trainGEMMFLOP/1e9, trainFLOP/1e9, b.rateName(), gemm.median(), floor, b.engTrain.median()/floor, b.engTrain.median()-floor))
	}
	if gemm.ok() && b.genDec.ok() {
		floor := decodeFLOP / (gemm.median() * 1e9) * 1e3
		out = append(out, fmt.Sprintf("a decode step of %d tokens is %.1f GFLOP: %.2f ms at %s; the engine's takes %.2f ms. "+
			"The samples of a prompt share its cached keys and values (one copy per prompt); the torch peers keep a copy per sample",
			genPrompts*genGroup, decodeFLOP/1e9, floor, b.rateName(), b.genDec.median()/genNew))
	}
	if b.engFwd.ok() {
		out = append(out, fmt.Sprintf("sanity: the engine's forward gives a mean cross-entropy of %.3f on random tokens (≈ ln V = 10.825 expected of random weights)", b.loss))
	}
	for _, ti := range b.torchInfo {
		if ti.Params != params {
			out = append(out, fmt.Sprintf("WARNING: the PyTorch model has %d parameters, the engine's %d: the comparison is not like for like", ti.Params, params))
		}
		if ti.Threads != b.threads {
			out = append(out, fmt.Sprintf("WARNING: torch runs %d threads, %d asked for", ti.Threads, b.threads))
		}
	}
	return out
}

// lastLevelCache is the size of the processor's last-level cache (the highest index sysfs
// lists), or "size unknown".
func lastLevelCache() string {
	size := "size unknown"
	for i := 0; ; i++ {
		raw, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu0/cache/index%d/size", i))
		if err != nil {
			return size
		}
		size = strings.TrimSpace(string(raw))
		if kb, err := strconv.Atoi(strings.TrimSuffix(size, "K")); err == nil {
			size = fmt.Sprintf("%d MiB", kb>>10)
		}
	}
}

// loadAvg is the first three fields of /proc/loadavg, or "unknown".
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// cpuName is the processor's model name from /proc/cpuinfo, or the architecture.
func cpuName() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOARCH
}

// cpuIdle says how the kernel idles a CPU (its cpuidle driver), from root (a sysfs root, "/"
// in use), or "" where it does not say. A virtual machine whose idle vCPUs halt at once
// (haltpoll with no polling) exits to the hypervisor to wake a thread on one, which is what
// waking the pool's helper costs there, at every backend call of a decode step.
func cpuIdle(root string) string {
	read := func(path string) string { // "" where it cannot be read
		raw, _ := os.ReadFile(filepath.Join(root, path))
		return strings.TrimSpace(string(raw))
	}
	driver := read("sys/devices/system/cpu/cpuidle/current_driver")
	if driver == "" || driver == "none" {
		return ""
	}
	if driver != "haltpoll" {
		return driver
	}
	ns, err := strconv.Atoi(read("sys/module/haltpoll/parameters/guest_halt_poll_ns"))
	switch {
	case err != nil:
		return driver
	case ns == 0:
		return "haltpoll, no polling (an idle vCPU halts at once: waking a thread on it is a hypervisor exit)"
	}
	return fmt.Sprintf("haltpoll, polling up to %.0f µs", float64(ns)/1e3)
}

// gemmFloorRows are a workload's floor — its weight products' FLOPs at the SGEMM rate — and
// the engine's time over it, under stable keys (floor.<name>_ms, floor.<name>_ratio). With
// paired, the rates sampled in the engine's own rounds (one per run), the ratio is the median
// of the rounds' ratios; else the floor is the gemm section's rate, measured minutes earlier.
func (b *bench) gemmFloorRows(group, name string, flop float64, eng, paired series, add func(Row)) {
	what := b.rateName()
	floor := skipped("needs the gemm section (the SGEMM rate)")
	if f := roundFloors(flop, paired, eng); f.ok() {
		floor = f
		what += ", sampled in each round"
	} else if rate := b.floorRate(); rate.ok() {
		floor = measured([]float64{flop / (rate.median() * 1e9) * 1e3})
	}
	add(valueRow(group, "floor."+name+"_ms", fmt.Sprintf("  floor: the weight products' %.1f GFLOP at %s", flop/1e9, what), "ms", floor, 0))
	add(ratioRow(group, "floor."+name+"_ratio", "  engine / floor", "", eng, floor, len(floor.samples) > 1))
}

// roundFloors is flop's floor in ms at each round's sampled rate; not measured unless the
// rates pair with eng's runs, one each.
func roundFloors(flop float64, rates, eng series) series {
	if !rates.ok() || len(rates.samples) != len(eng.samples) {
		return skipped("no rate sampled in each round")
	}
	var f series
	for _, r := range rates.samples {
		f.samples = append(f.samples, flop/(r*1e9)*1e3)
	}
	return f
}

// kernelsLine says which kernels each side ran: the engine's OpenBLAS family, the torch
// processes' OpenBLAS family and operator kernels, and how the tuned peer's were chosen.
func (b *bench) kernelsLine() string {
	if len(b.torchInfo) == 0 {
		return ""
	}
	seen := map[string]bool{}
	var sides []string
	for _, ti := range b.torchInfo {
		dnn := ti.OneDNN
		if ti.OneDNNISA != "" {
			dnn += " " + ti.OneDNNISA
		}
		d := fmt.Sprintf("torch: OpenBLAS %s kernels (OPENBLAS_CORETYPE=%q), operators %s, oneDNN %s, GLIBC_TUNABLES=%q", ti.BLASCore, ti.CoreType, ti.Capability, dnn, ti.Tunables)
		if !seen[d] {
			seen[d] = true
			sides = append(sides, d)
		}
	}
	line := fmt.Sprintf("kernels: engine %s, OpenBLAS %s; %s", cpu.Capability(), cpu.BLASCoreName(), strings.Join(sides, "; "))
	if len(b.torchCap.tried) > 0 {
		line += fmt.Sprintf("; tuned torch's operators chosen by a forward each: %s", strings.Join(b.torchCap.tried, ", "))
	}
	return line
}

// flagDegraded marks the rows of a peer that ran kernels below what the processor can do,
// and the engine's ratios against it: a figure against a crippled peer is not a comparison.
func flagDegraded(rows []Row, infos []torchInfo) []Row {
	why := ""
	for _, ti := range infos {
		if d := ti.degraded(); d != "" {
			why = d
		}
	}
	if why == "" {
		return rows
	}
	for i, r := range rows {
		if strings.HasPrefix(r.Key, "torch.") || strings.HasPrefix(r.Key, "speedup.") && strings.Contains(r.Key, "torch") {
			rows[i].Note = strings.TrimSpace("DEGRADED PEER (" + why + "): not a fair figure. " + r.Note)
			rows[i].Degraded = true
		}
	}
	return rows
}

// flagLooseFloors marks the decode steps' ratios whose floors the run itself shows to be too
// slow: a phase the clocked runs timed below its floor of bytes at the bandwidth
// (decodePhaseRows marks it) read memory faster than the run's bandwidth samples say it can,
// so those were taken while the machine was slower than when the step ran, and the step's
// ratio against the same rates reads too low.
func flagLooseFloors(rows []Row) []Row {
	below := map[string][]string{} // by row count's key suffix ("" for 64 rows, "8")
	for _, r := range rows {
		for _, phase := range []string{"products", "attention"} {
			if d, ok := strings.CutPrefix(r.Key, "floor.decode_"+phase+"_ratio"); ok && r.Loose {
				below[d] = append(below[d], fmt.Sprintf("its %s took %.2fx of their floor", phase, *r.Median))
			}
		}
	}
	for i, r := range rows {
		for _, step := range []string{"floor.decode_ratio", "floor.decode_phases_ratio"} {
			if d, ok := strings.CutPrefix(r.Key, step); ok && len(below[d]) > 0 {
				rows[i].markLoose(strings.Join(below[d], ", ") + " in the clocked runs: the bandwidth was measured while the machine was slower than when the step ran")
			}
		}
	}
	return rows
}

// markLoose flags a ratio whose floor the run showed to be too slow, saying why before the
// row's own note.
func (r *Row) markLoose(why string) {
	r.Note = strings.TrimSpace("LOOSE FLOOR (" + why + ", so this ratio reads low). " + r.Note)
	r.Loose = true
}

// stepFLOPFloors are the ratios of whole workloads to floors of FLOPs at the SGEMM rate
// (flagStepsBelowFloor).
var stepFLOPFloors = []string{"floor.forward_ratio", "floor.train_ratio", "floor.grpo_reference_ratio", "floor.grpo_update_ratio", "floor.grpo_total_ratio"}

// flagStepsBelowFloor marks the ratios of stepFLOPFloors below edge, the fastest the
// engine's own products ran against the floors' rate in the gemm section (kernelEdge): a
// workload is its products and more, so one that ran faster than its products can was timed
// in a faster window than every sample of the rate it is divided by, and its ratio reads low.
// A run here put a train step at 0.89 of floors paired with rate samples of its rounds, one
// of them slowed to half the rate by another process while the step beside it was not.
func flagStepsBelowFloor(rows []Row, edge float64) []Row {
	for i, r := range rows {
		if !slices.Contains(stepFLOPFloors, r.Key) || r.Median == nil || *r.Median >= edge {
			continue
		}
		rows[i].markLoose(fmt.Sprintf("the step took %.2fx of its floor, and the engine's own products %.2fx of theirs: the rate was sampled while the machine was slower than when the step ran", *r.Median, edge))
	}
	return rows
}

// kernelEdge is the time the engine's own products took against OpenBLAS's on the pool in
// the gemm section, at the faster of the two shapes there, and at most 1: the least a workload
// of products can take of its FLOP floor.
func (b *bench) kernelEdge() float64 {
	edge := 1.0
	for _, p := range [][2]series{{b.gemm.pool, b.gemm.forward}, {b.gemm.poolProj, b.gemm.forwardProj}} {
		if p[0].ok() && p[1].ok() {
			edge = min(edge, p[0].median()/p[1].median())
		}
	}
	return edge
}

// summaryKeys are the ratios make bench ends with, by stable key.
var summaryKeys = []struct{ key, name string }{
	{"floor.forward_ratio", "forward"}, {"floor.train_ratio", "train"},
	{"floor.decode_phases_ratio", "decode64"}, {"floor.decode_ratio8", "decode8"}, {"floor.grpo_total_ratio", "grpo"},
	{"speedup.forward_vs_torch", "forward"}, {"speedup.train_vs_torch", "train"}, {"speedup.gen_decode_vs_torch_static", "decode (static cache)"},
}

// summary is one line of the headline ratios, naming the processor: engine / floor for each
// workload, and the engine's speed-up over tuned torch. Three decimals: the targets are
// round numbers, and at two a ratio of 1.204 would read as 1.20x.
func summary(rows []Row, cpuName string) string {
	byKey := map[string]Row{}
	for _, r := range rows {
		byKey[r.Key] = r
	}
	var floors, peers []string
	for _, k := range summaryKeys {
		r, ok := byKey[k.key]
		if !ok || r.Median == nil {
			continue
		}
		v := fmt.Sprintf("%s %.3fx", k.name, *r.Median)
		if r.Degraded {
			v += " (degraded peer)"
		}
		if r.Loose {
			v += " (loose floor)"
		}
		if strings.HasPrefix(k.key, "floor.") {
			floors = append(floors, v)
		} else {
			peers = append(peers, v)
		}
	}
	var parts []string
	if len(floors) > 0 {
		parts = append(parts, "engine / floor: "+strings.Join(floors, ", "))
	}
	if len(peers) > 0 {
		parts = append(parts, "engine speed-up over tuned torch: "+strings.Join(peers, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("summary (%s): %s", cpuName, strings.Join(parts, "; "))
}
