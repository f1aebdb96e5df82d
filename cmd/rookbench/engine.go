package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
	"github.com/rookscript/rookscript/engine/device"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
)

// sample is one timed run of anything: wall-clock ms, and the CPU time (user + system, all
// threads) and system time of the process that ran it, in ms. Generation runs also split
// their time into prefill and decode; sampler runs report their token rate.
type sample struct {
	ms, cpu, sys    float64
	prefill, decode float64
	tokPerS         float64
	steps           int
}

// cpuMS is this process's CPU time so far (all threads): user + system, and system alone.
func cpuMS() (total, sys float64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN(), math.NaN()
	}
	u, s := float64(ru.Utime.Nano())/1e6, float64(ru.Stime.Nano())/1e6
	return u + s, s
}

// timed runs f once and measures it in this process. A run done by another process (a
// PyTorch server) comes back with its own wall and CPU times, which are kept.
func timed(f func() (sample, error)) (sample, error) {
	c0, s0 := cpuMS()
	t := time.Now()
	r, err := f()
	if r.ms != 0 {
		return r, err
	}
	r.ms = float64(time.Since(t).Nanoseconds()) / 1e6
	c1, s1 := cpuMS()
	r.cpu, r.sys = c1-c0, s1-s0
	return r, err
}

// plain adapts a function without results of its own to timed.
func plain(f func() error) func() (sample, error) {
	return func() (sample, error) { return sample{}, f() }
}

// GEMM ceiling shape: out (gemmN, gemmOC) = inp (gemmN, gemmC) · w (gemmOC, gemmC)ᵀ, the MLP's
// c_fc product at 768 rows.
const gemmN, gemmC, gemmOC = 768, 768, 3072

// gemmSample is the least time one GEMM-rate sample spends, repeating the product as needed.
const gemmSample = 250 * time.Millisecond

// gemmRate measures the SGEMM floor at the ceiling shape in GFLOP/s (product, below), one
// sample per run; each sample repeats the product for at least gemmSample.
func gemmRate(be backend.Backend, warmup, runs int, label string) series {
	return gemmRateAt(be, warmup, runs, label, gemmN, gemmC, gemmOC, true)
}

// blasProducts are backends that can run a product through their vendor SGEMM, which their
// forward's batch-invariant MatMul does not: the CPU's (OpenBLAS), and a device's (through its
// driver: cuBLAS).
type blasProduct interface {
	BLASMatMul(out, inp, w backend.Buf, n, c, oc int)
}

type deviceDriver interface{ Driver() launch.Driver }

// product is out (n, oc) = inp (n, c) · w (oc, c)ᵀ on be: through the vendor SGEMM when sgemm is
// set and be has one (the floors' rate), else through be.MatMul (the forward's product).
func product(be backend.Backend, sgemm bool) func(out, inp, w backend.Buf, n, c, oc int) {
	if sgemm {
		if bp, ok := be.(blasProduct); ok {
			return bp.BLASMatMul
		}
		if dd, ok := be.(deviceDriver); ok {
			d := dd.Driver()
			addr := func(x backend.Buf) uintptr { return x.M.Dev + 4*uintptr(x.Off) }
			// Row-major out = inp·wᵀ is column-major outᵀ = w·inpᵀ (launch.Backend's trick).
			return func(out, inp, w backend.Buf, n, c, oc int) {
				d.Sgemm(true, false, oc, n, c, 1, addr(w), c, addr(inp), c, 0, addr(out), oc)
			}
		}
	}
	return func(out, inp, w backend.Buf, n, c, oc int) { be.MatMul(out, inp, w, backend.Buf{}, n, c, oc) }
}

// gemmRateAt is gemmRate at out (n, oc) = inp (n, c) · w (oc, c)ᵀ, through the vendor SGEMM
// (sgemm) or MatMul.
func gemmRateAt(be backend.Backend, warmup, runs int, label string, n, c, oc int, sgemm bool) series {
	return gemmRates(runs, newGEMMSampler(be, warmup, label, n, c, oc, sgemm))[0]
}

// gemmSampler times one product on one backend: out (n, oc) = inp (n, c) · w (oc, c)ᵀ, through
// the vendor SGEMM or MatMul; a sample repeats it for at least gemmSample and ends when the
// device has finished.
type gemmSampler struct {
	label string
	be    backend.Backend
	out   backend.Buf
	one   func()
	reps  int
	flop  float64
}

func newGEMMSampler(be backend.Backend, warmup int, label string, n, c, oc int, sgemm bool) *gemmSampler {
	r := rand.New(rand.NewPCG(3, 3))
	host := func(n int) backend.Buf {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		b := be.Alloc(n)
		be.Upload(b, v)
		return b
	}
	inp, w, out := host(n*c), host(oc*c), be.Alloc(n*oc)
	prod := product(be, sgemm)
	g := &gemmSampler{label: label, be: be, out: out, flop: 2 * float64(n) * float64(c) * float64(oc)}
	g.one = func() { prod(out, inp, w, n, c, oc) }
	for range max(warmup, 1) {
		g.one()
	}
	finishBuf(be, out)
	t := time.Now()
	g.one()
	finishBuf(be, out)
	g.reps = max(1, int(math.Ceil(float64(gemmSample)/float64(max(time.Since(t), time.Microsecond)))))
	return g
}

func (g *gemmSampler) sample() sample {
	s, _ := timed(func() (sample, error) {
		for range g.reps {
			g.one()
		}
		finishBuf(g.be, g.out)
		return sample{}, nil
	})
	return s
}

// rate is a sample's GFLOP/s.
func (g *gemmSampler) rate(s sample) float64 { return g.flop * float64(g.reps) / s.ms / 1e6 }

// gemmRates takes runs samples of each sampler in turn, one of each and again, so that rates
// compared as a ratio (a floor's and the kernel's) meet the same load on a shared machine:
// measured one after the other, a burst of another process's work fell on one side's samples
// alone (a MatMul/SGEMM ratio of 0.56 in one run, 1.62 in the next).
func gemmRates(runs int, gs ...*gemmSampler) []series {
	samples := make([][]sample, len(gs))
	for i := range runs {
		for k, g := range gs {
			s := g.sample()
			samples[k] = append(samples[k], s)
			progress("  %s %d/%d: %.1f GFLOP/s", g.label, i+1, runs, g.rate(s))
		}
	}
	out := make([]series, len(gs))
	for k, g := range gs {
		out[k] = fromRuns(samples[k], g.rate)
	}
	return out
}

// gemmResults are the ways the CPU backend can run the ceiling GEMM, and the memory
// bandwidth the small-batch floors use.
type gemmResults struct {
	single, pool, blasThreads series
	bandwidth                 series // GB/s read by the pool's threads
	// The forward's batch-invariant MatMul (not the vendor SGEMM) at the ceiling shape, and
	// both at the MLP's down projection (inner size 3072): the forward's products against
	// their floor.
	forward, poolProj, forwardProj series
}

// measureGEMM times the ceiling GEMM through OpenBLAS on one worker and on the backend's pool
// of threads workers (the product cut into one part per worker, as every backward GEMM runs),
// and, for reference, as one OpenBLAS call on its own threads; then the memory read
// bandwidth; then the forward's own product (MatMul) at the ceiling shape, and both at the
// MLP's down projection, each MatMul's samples alternated with its floor's.
func measureGEMM(threads, warmup, runs int) (gemmResults, error) {
	var g gemmResults
	one, err := device.Open("cpu", device.Options{Threads: 1})
	if err != nil {
		return g, err
	}
	g.single = gemmRate(one, warmup, runs, "SGEMM, 1 thread")
	g.bandwidth = measureBandwidth(threads, runs)
	if threads == 1 {
		g.pool = skipped("-threads 1: the pool is the single thread above")
		g.blasThreads = skipped("-threads 1")
		return g, nil
	}
	pool, err := device.Open("cpu", device.Options{Threads: threads})
	if err != nil {
		return g, err
	}
	r := gemmRates(runs,
		newGEMMSampler(pool, warmup, fmt.Sprintf("SGEMM, pool of %d", threads), gemmN, gemmC, gemmOC, true),
		newGEMMSampler(pool, warmup, fmt.Sprintf("MatMul, pool of %d", threads), gemmN, gemmC, gemmOC, false))
	g.pool, g.forward = r[0], r[1]
	r = gemmRates(runs,
		newGEMMSampler(pool, warmup, fmt.Sprintf("SGEMM %d×%d×%d, pool of %d", gemmN, gemmOC, gemmC, threads), gemmN, gemmOC, gemmC, true),
		newGEMMSampler(pool, warmup, fmt.Sprintf("MatMul %d×%d×%d, pool of %d", gemmN, gemmOC, gemmC, threads), gemmN, gemmOC, gemmC, false))
	g.poolProj, g.forwardProj = r[0], r[1]
	cpu.SetBLASThreads(threads)
	g.blasThreads = gemmRate(one, warmup, runs, fmt.Sprintf("SGEMM, OpenBLAS %d threads", threads))
	cpu.SetBLASThreads(1) // as every CPU backend wants it
	return g, nil
}

// bandwidthBytes is the buffer the bandwidth runs read: far larger than any cache.
const bandwidthBytes = 1 << 30

// bandwidthSampler reads a 1 GiB buffer on threads goroutines (each its own contiguous part,
// eight independent sums so that loads, not adds, set the pace): the rate a decode step
// streams weights and cached keys at when it is memory-bound.
type bandwidthSampler struct {
	threads int
	buf     []uint64
	sink    uint64
}

// newBandwidthSampler allocates the buffer through the allocator of the engine's buffers, on
// the same pages (cpu.HostFloats), and touches every page before any timing.
func newBandwidthSampler(threads int) *bandwidthSampler {
	f := cpu.HostFloats(bandwidthBytes / 4)
	buf := unsafe.Slice((*uint64)(unsafe.Pointer(&f[0])), len(f)/2)
	for i := range buf {
		buf[i] = uint64(i)
	}
	bs := &bandwidthSampler{threads: threads, buf: buf}
	bs.read()
	return bs
}

func (bs *bandwidthSampler) read() {
	var wg sync.WaitGroup
	sums := make([]uint64, bs.threads)
	per := len(bs.buf) / bs.threads
	for t := range bs.threads {
		wg.Go(func() {
			part := bs.buf[t*per : (t+1)*per]
			var a, b, c, d, e, f, g, h uint64
			for i := 0; i+8 <= len(part); i += 8 {
				a += part[i]
				b += part[i+1]
				c += part[i+2]
				d += part[i+3]
				e += part[i+4]
				f += part[i+5]
				g += part[i+6]
				h += part[i+7]
			}
			sums[t] = a + b + c + d + e + f + g + h
		})
	}
	wg.Wait()
	for _, v := range sums {
		bs.sink += v
	}
}

// sample times one read of the buffer.
func (bs *bandwidthSampler) sample() sample {
	s, _ := timed(func() (sample, error) { bs.read(); return sample{}, nil })
	return s
}

// gbps is a sample's rate in GB/s.
func gbps(s sample) float64 { return bandwidthBytes / s.ms / 1e6 }

// measureBandwidth is the read rate of runs samples, in GB/s.
func measureBandwidth(threads, runs int) series {
	bs := newBandwidthSampler(threads)
	var out []sample
	for i := range runs {
		s := bs.sample()
		out = append(out, s)
		progress("  memory read bandwidth %d/%d: %.1f GB/s", i+1, runs, gbps(s))
	}
	if bs.sink == 1 {
		progress("") // keeps the sums alive
	}
	return fromRuns(out, gbps)
}

// loadModel is GPT-2 124M with random weights, asked for by name, on be.
func loadModel(be backend.Backend) (*gpt2.Model, gpt2.Source, error) {
	cfg, params, src, err := gpt2.Load(modelSpec)
	if err != nil {
		return nil, src, err
	}
	m, err := gpt2.New(be, cfg, params)
	return m, src, err
}

// trainBatch is bsz random sequences of t tokens with every position scored against the next
// token (the last one against a random extra token): the batch of engine/gpt2's
// BenchmarkTrainStep124M.
func trainBatch(vocab, bsz, t int) *gpt2.Batch {
	r := rand.New(rand.NewPCG(2, 2))
	var b gpt2.Batch
	for range bsz {
		s := make([]int32, t+1)
		for i := range s {
			s[i] = int32(r.IntN(vocab))
		}
		b.Add(s[:t], 0)
		b.Rows = append(b.Rows, int32(len(b.Tokens)-1))
		b.Targets = append(b.Targets, s[t])
	}
	return &b
}

// meanCE is the gradient of the mean cross-entropy over rows scored rows: −1/rows for each.
func meanCE(rows int) gpt2.RowGrad {
	w := -1 / float32(rows)
	return func(_ int, _, _, dlogp, _ []float32) {
		for i := range dlogp {
			dlogp[i] = w
		}
	}
}

// engineSteps runs the engine's forward and train step at B×T.
type engineSteps struct {
	m    *gpt2.Model
	b    *gpt2.Batch
	grad gpt2.RowGrad
	out  gpt2.Output
	opt  *optim.AdamW
	loss float64 // mean cross-entropy of the first forward (≈ ln V for a random model)
}

// newEngineSteps prepares the batch, runs one forward (for the loss) and one train step
// (which allocates gradients, optimizer moments and backward activations: the first touch of
// ~1.5 GB, not part of any measurement).
func newEngineSteps(m *gpt2.Model, bsz, t int) (*engineSteps, error) {
	e := &engineSteps{m: m}
	e.b = trainBatch(m.Config.VocabSize, bsz, t)
	e.grad = meanCE(len(e.b.Rows))
	if err := e.forward(); err != nil {
		return nil, err
	}
	for _, lp := range e.out.LogP {
		e.loss -= float64(lp) / float64(len(e.out.LogP))
	}
	opt, err := optim.NewAdamW(m, optim.DefaultAdamW())
	if err != nil {
		return nil, err
	}
	e.opt = opt
	return e, e.train()
}

// forward is Forward with the LM head and log-softmax on every row.
func (e *engineSteps) forward() error { return e.m.Forward(e.b, 1, false, &e.out) }

// train is a step as the engine trains (sft.Step, the GRPO update): ZeroGrads,
// ForwardBackward of the mean cross-entropy (each chunk of the LM head's logits becomes its
// gradient while in memory) and an AdamW step.
func (e *engineSteps) train() error {
	e.m.ZeroGrads()
	if err := e.m.ForwardBackward(e.b, 1, false, e.grad, &e.out); err != nil {
		return err
	}
	e.opt.Step(1e-4)
	finish(e.m)
	return nil
}

// allocsPerStep counts the heap allocations of one more train step.
func (e *engineSteps) allocsPerStep() (float64, error) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := e.train()
	runtime.ReadMemStats(&after)
	return float64(after.Mallocs - before.Mallocs), err
}

// Rollout shapes of issue 4 item 5: genPrompts unique prompts of genPromptLen tokens, each
// completed genGroup times, genNew decode steps.
const genPrompts, genGroup, genPromptLen, genNew = 8, 8, 80, 64

// genPromptTokens are the benchmark's prompts: genPrompts random sequences of genPromptLen.
func genPromptTokens(vocab int) [][]int32 {
	r := rand.New(rand.NewPCG(4, 4))
	out := make([][]int32, genPrompts)
	for p := range out {
		out[p] = make([]int32, genPromptLen)
		for i := range out[p] {
			out[p][i] = int32(r.IntN(vocab))
		}
	}
	return out
}

// engineGen is greedy KV-cache generation through the model's own calls: Prefill of the
// unique prompts (one slot per prompt), ShareSlot of each prompt's cache with its group's
// other slots, then genNew DecodeLogits steps of one token per sequence, the next token being
// the argmax of the logits: no softmax, as torch_generate.py's greedy loop takes none.
type engineGen struct {
	m                         *gpt2.Model
	kv                        *gpt2.KVCache
	threads                   int
	nPrompts, group           int
	prompts                   gpt2.Batch
	promptSlots               []int32
	first, tokens, slots, pos []int32
	decodeStart               func() // called as the decode steps begin (nil: nothing)
}

// newEngineGen prepares generation of group samples for each of the first nPrompts
// benchmark prompts.
func newEngineGen(m *gpt2.Model, threads, nPrompts, group int) (*engineGen, error) {
	seqs := nPrompts * group
	kv, err := m.NewKVCache(seqs, genPromptLen+genNew)
	if err != nil {
		return nil, err
	}
	g := &engineGen{m: m, kv: kv, threads: threads, nPrompts: nPrompts, group: group, first: make([]int32, nPrompts),
		tokens: make([]int32, seqs), slots: make([]int32, seqs), pos: make([]int32, seqs)}
	for p, s := range genPromptTokens(m.Config.VocabSize)[:nPrompts] {
		g.prompts.Add(s, len(s)) // context only: nothing scored
		g.promptSlots = append(g.promptSlots, int32(p*group))
	}
	for i := range g.slots {
		g.slots[i] = int32(i)
	}
	return g, nil
}

// once is one generation; it fills the sample's prefill (with the copies) and decode ms.
func (g *engineGen) once() (sample, error) {
	var r sample
	v := g.m.Config.VocabSize
	t0 := time.Now()
	d, err := g.m.Prefill(g.kv, &g.prompts, g.promptSlots, 1)
	if err != nil {
		return r, err
	}
	argmaxRows(g.first, d.Logits, v, g.threads)
	for p := range g.nPrompts {
		for j := range g.group {
			s := p*g.group + j
			if j > 0 {
				if err := g.m.ShareSlot(g.kv, s, p*g.group, genPromptLen); err != nil {
					return r, err
				}
			}
			g.tokens[s] = g.first[p]
		}
	}
	if g.decodeStart != nil {
		g.decodeStart()
	}
	t1 := time.Now()
	for step := range genNew {
		for s := range g.pos {
			g.pos[s] = int32(genPromptLen + step)
		}
		logits, err := g.m.DecodeLogits(g.kv, g.tokens, g.slots, g.pos)
		if err != nil {
			return r, err
		}
		argmaxRows(g.tokens, logits, v, g.threads)
	}
	t2 := time.Now()
	r.prefill, r.decode = float64(t1.Sub(t0).Nanoseconds())/1e6, float64(t2.Sub(t1).Nanoseconds())/1e6
	return r, nil
}

// argmaxRows sets out[i] to the index of the largest of row i of logits (rows of v), the rows
// shared among threads goroutines.
func argmaxRows(out []int32, logits []float32, v, threads int) {
	rows := len(out)
	per := (rows + threads - 1) / threads
	var wg sync.WaitGroup
	for lo := 0; lo < rows; lo += per {
		hi := min(rows, lo+per)
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				out[i] = rollout.Argmax(logits[i*v : (i+1)*v])
			}
		})
	}
	wg.Wait()
}

// engineSampler is the real rollout path, rollout.Sampler.Generate, at the same shapes:
// temperature 1, sampled from the full distribution, genNew new tokens per completion (the
// first from the prefill, so genNew-1 decode steps unless a completion stops at
// <|endoftext|> first), logprobs recorded.
type engineSampler struct {
	s       *rollout.Sampler
	prompts [][]int32
	cfg     rollout.Config
}

func newEngineSampler(m *gpt2.Model) *engineSampler {
	return &engineSampler{s: rollout.NewSampler(m), prompts: genPromptTokens(m.Config.VocabSize),
		cfg: rollout.Config{Group: genGroup, MaxNewTokens: genNew, Temperature: 1, Seed: 7}}
}

// once is one rollout; the sample carries its new tokens per second and decode steps.
func (e *engineSampler) once() (sample, error) {
	b, err := e.s.Generate(context.Background(), e.prompts, e.cfg)
	if err != nil {
		return sample{}, err
	}
	return sample{tokPerS: b.Stats.TokensPerSecond(), steps: b.Stats.DecodeSteps}, nil
}
