package main

// double rk_fma_peak(int threads, int lanes, int ms);
import "C"

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/rollout"
)

// Every workload has one floor. Per phase it is the weight products' FLOPs at the GEMM rate or
// the bytes read beyond what the last-level cache keeps at the memory bandwidth, whichever takes
// longer (streaming and computing overlap at best); the phases add up (each needs the one
// before); an optimizer update is bytes alone. The GEMM rate is the fastest product kernel the
// machine runs (the engine's MatMul, OpenBLAS under each family the processor runs, or cuBLAS);
// both rates are the best sampled in the section's own rounds, so that a floor and its workload
// meet the same machine. Attention's FLOPs are not counted: they are not products at the GEMM
// rate. Every term is a lower bound, so a workload faster than its floor is a bench bug, as is
// a rate above the FMA peak (every core's independent FMAs, peak.c).

// phase is part of a workload: its products' FLOPs and the bytes it reads from memory.
type phase struct{ flop, bytes float64 }

// rates are a section's floor rates: GFLOP/s, GB/s, and the bytes the last-level cache keeps;
// and the FMA peak in GFLOP/s, which no product exceeds.
type rates struct{ gflops, gbps, llc, peak float64 }

// ms is the floor of phases, NaN where a rate it needs was not measured.
func (r rates) ms(ps ...phase) float64 {
	var s float64
	for _, p := range ps {
		t, bytes := 0.0, max(0, p.bytes-r.llc)
		if p.flop > 0 {
			t = p.flop / r.gflops / 1e6
		}
		if bytes > 0 {
			t = max(t, bytes/r.gbps/1e6)
		}
		s += t
	}
	return s
}

// atPeak is the time the phases' products take at the FMA peak, memory not counted.
func (r rates) atPeak(ps ...phase) float64 { return rates{gflops: r.peak, gbps: math.Inf(1)}.ms(ps...) }

// weights a row's products multiply: 12·C² a layer, and V·C in the LM head.
func weights(cfg gpt2.Config, head bool) float64 {
	w := 12 * float64(cfg.NumLayers*cfg.Channels*cfg.Channels)
	if head {
		w += float64(cfg.VocabSize * cfg.Channels)
	}
	return w
}

// decodeWork is a decode step of rows rows: the products, reading every weight once, then
// attention, reading the keys and values of cached positions.
func decodeWork(cfg gpt2.Config, rows int, cached float64) []phase {
	w := weights(cfg, true)
	return []phase{{flop: 2 * w * float64(rows), bytes: 4 * w}, {bytes: cached * 8 * float64(cfg.NumLayers*cfg.Channels)}}
}

// adamWork is an AdamW update of cfg: each parameter, gradient and moment read (writes not counted).
func adamWork(cfg gpt2.Config) phase { return phase{bytes: 16 * float64(gpt2.NewLayout(cfg).Total)} }

// grpoWork is what a GRPO step must compute: the rollout's prefill, then each decode step's
// products (every live row through every weight) and attention (each prompt's cached
// positions once, each row's own); and a forward over the packed batch (each group's prompt
// but its last token once, each completion from that token, scored). The reference runs one
// such forward, the update three (forward and backward).
func grpoWork(cfg gpt2.Config, b *rollout.Batch) (roll []phase, forward phase) {
	block, head, longest := weights(cfg, false), weights(cfg, true)-weights(cfg, false), 0
	roll = []phase{{}}
	for _, p := range b.Prompts {
		roll[0].flop += 2 * (block*float64(len(p)) + head)
		forward.flop += 2 * block * float64(len(p)-1)
	}
	for _, c := range b.Completions {
		longest = max(longest, len(c.Tokens))
		forward.flop += 2 * (block + head) * float64(len(c.Tokens))
	}
	for step := 1; step < longest; step++ {
		var rows, cached float64
		live := map[int]bool{}
		for _, c := range b.Completions {
			if len(c.Tokens) > step {
				rows, cached = rows+1, cached+float64(step)
				if !live[c.Prompt] {
					live[c.Prompt], cached = true, cached+float64(len(b.Prompts[c.Prompt]))
				}
			}
		}
		roll = append(roll, decodeWork(cfg, int(rows), cached)...)
	}
	return roll, forward
}

// measure alternates a section's contenders with the floor rates' samplers, repeat times a
// round each, adds the rates' rows under group and returns them (the best of each sampled).
func (b *bench) measure(group, key string, runs, repeat int, cs ...*contender) rates {
	r := rates{gflops: math.NaN(), gbps: math.NaN(), peak: math.NaN()}
	if b.device == "cpu" { // a GPU's L2 keeps a small part of the weights: not counted
		r.llc = float64(lastLevelCache())
	}
	if b.best.sample == nil { // no gemm section ran: a short measurement chooses the floors' kernel
		progress("  choosing the floors' kernel: every kernel at every shape, 3 samples each")
		if err := b.measureKernels(3, ""); err != nil {
			b.failure("floor rates", err)
			return r
		}
	}
	rc, mc := sampling(b.best, repeat), sampling(b.mem, repeat)
	alternate(key, b.warmup, runs, append(cs, rc, mc)...)
	gs, bs := rc.series(rate), mc.series(rate)
	r.gflops, r.gbps, r.peak = gs.best(true), bs.best(true), cmp.Or(b.peak, r.peak)
	b.add(valueRow(group, "floor."+key+"_rate", "  floor rate in these rounds: "+rc.name, "GFLOP/s", gs).ofPeak(b.peak))
	b.add(valueRow(group, "floor."+key+"_bandwidth", "  floor bandwidth in these rounds: "+mc.name, "GB/s", bs))
	return r
}

// cpuKernels are the CPU's product kernels: MatMul, OpenBLAS on the engine's family (own),
// and OpenBLAS under each other family of fams (those the processor runs).
func cpuKernels(own string, fams []string) []string {
	ks := []string{"matmul", "openblas"}
	for _, f := range fams {
		if !strings.EqualFold(f, own) {
			ks = append(ks, "openblas_"+f)
		}
	}
	return ks
}

// fastestMedian is the contender of the highest median of value (-1: none); a failed one never wins.
func fastestMedian(cs []*contender, value func(sample) float64) int {
	best, top := -1, math.Inf(-1)
	for i, c := range cs {
		if m := c.series(value).median(); c.err == nil && m > top {
			best, top = i, m
		}
	}
	return best
}

// measureKernels times the floors' candidate products alternated with the FMA peak and the
// memory bandwidth, and keeps the fastest median's as the floors' rate and the peak's best
// sample: on the CPU cpuKernels at the MLP's two products over 768 rows; on a GPU MatMul and
// cuBLAS at the MLP's product over a GRPO minibatch and at a large square, nearest cuBLAS's
// peak. Rows go under a group given.
func (b *bench) measureKernels(runs int, group string) error {
	be, err := b.backend()
	if err != nil {
		return err
	}
	type shape struct {
		key      string
		n, c, oc int
	}
	kernels, shapes := cpuKernels(cpu.BLASCoreName(), cpu.BLASFamilies()), []shape{{"fc", 768, 768, 3072},
		{"proj", 768, 3072, 768}}
	pc := &contender{name: "FMA peak", err: errors.New("the processor has no FMA")}
	if b.device != "cpu" {
		kernels, pc.err = []string{"matmul", "cublas"}, errors.New("measured on the CPU alone")
		shapes = []shape{{"model", 16 * 144, 768, 3072}, {"square", 8192, 8192, 8192}}
	} else if peak := fmaPeak(b.threads); peak.sample != nil {
		pc = sampling(peak, 1)
	}
	if b.mem.sample == nil && b.device == "cpu" {
		b.mem = memReader(b.threads)
	} else if b.mem.sample == nil {
		b.mem = devCopy(be)
	}
	var cs []*contender
	var ss []sampler
	var keys []string
	for _, sh := range shapes {
		for _, k := range kernels {
			ss, keys = append(ss, gemmSampler(be, k, sh.n, sh.c, sh.oc)), append(keys, strings.ToLower(k)+"_"+sh.key)
			cs = append(cs, sampling(ss[len(ss)-1], 1))
		}
	}
	mc := sampling(b.mem, 1)
	alternate("products", 0, runs, append(cs, pc, mc)...)
	if pc.err == nil {
		b.peak = max(b.peak, pc.series(rate).best(true))
	}
	b.best = ss[fastestMedian(cs, rate)]
	if group == "" {
		return nil
	}
	for i, c := range cs {
		b.add(valueRow(group, "gemm."+keys[i], c.name, "GFLOP/s", c.series(rate)).ofPeak(b.peak))
	}
	b.add(valueRow(group, "gemm.fma_peak", pc.name, "GFLOP/s", pc.series(rate)))
	b.add(valueRow(group, "mem.bandwidth", mc.name, "GB/s", mc.series(rate)))
	return nil
}

func (b *bench) runGEMM() {
	progress("== products, FMA peak, memory bandwidth")
	group := "Products by every kernel family here (floors take the fastest), the FMA peak, memory bandwidth"
	if err := b.measureKernels(b.runs, group); err != nil {
		b.failure("gemm", err)
	}
}

// sample is one timed run: wall ms; a generation's prefill and decode ms; a rate sampler's
// work (GFLOP or GB).
type sample struct{ ms, prefill, decode, work float64 }

func wallMS(s sample) float64 { return s.ms }
func rate(s sample) float64   { return s.work / s.ms * 1e3 }

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// series is a value per timed run, or why it was not measured.
type series struct {
	v   []float64
	why string
}

func skipped(why string) series   { return series{why: why} }
func measured(v []float64) series { return series{v: v} }
func (s series) ok() bool         { return s.why == "" && len(s.v) > 0 }
func (s series) median() float64  { return median(s.v) }

// best is the highest (or lowest) value, NaN for none.
func (s series) best(highest bool) float64 {
	if len(s.v) == 0 {
		return math.NaN()
	} else if highest {
		return slices.Max(s.v)
	}
	return slices.Min(s.v)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	v = slices.Sorted(slices.Values(v))
	return (v[(len(v)-1)/2] + v[len(v)/2]) / 2
}

// contender is one side of an alternated measurement.
type contender struct {
	name   string
	run    func() (sample, error) // nil: not selected
	repeat int                    // runs in each round (0: one)
	runs   []sample
	err    error
}

// sampling is a contender of a sampler's samples.
func sampling(s sampler, repeat int) *contender {
	return &contender{name: s.name, repeat: repeat, run: func() (sample, error) { return s.sample(), nil }}
}

func (c *contender) selected() bool { return c.run != nil || c.err != nil }

func (c *contender) series(value func(sample) float64) series {
	s := series{}
	if c.err != nil {
		s.why = c.err.Error()
	}
	for _, r := range c.runs {
		s.v = append(s.v, value(r))
	}
	return s
}

// alternate runs the selected contenders in turn, each repeat runs a round: warmup untimed
// rounds, then runs timed ones, so that a slow moment of the machine falls on every side. A
// garbage collection before each run keeps setup's out of it, as Go's testing package does; a
// pause lets a peer's BLAS threads stop spinning. A contender that fails drops out.
func alternate(what string, warmup, runs int, cs ...*contender) {
	for round := range warmup + runs {
		for _, c := range cs {
			for range max(1, c.repeat) {
				if c.run == nil || c.err != nil {
					break
				}
				runtime.GC()
				time.Sleep(200 * time.Millisecond)
				t := time.Now()
				s, err := c.run()
				if s.ms == 0 { // a peer's run keeps the time its process took
					s.ms = ms(time.Since(t))
				}
				at := fmt.Sprintf("  %s, round %d of %d (%d warm-up): %s", what, round+1, warmup+runs, warmup, c.name)
				if c.err = err; err != nil {
					progress("%s failed: %v", at, err)
				} else if progress("%s %.1f ms", at, s.ms); round >= warmup {
					c.runs = append(c.runs, s)
				}
			}
		}
	}
}

// sampler is what a floor takes a rate from: a product (GFLOP a run) or the memory (GB).
type sampler struct {
	name   string
	sample func() sample
}

// gemmSample is the least time one product sample spends, repeating the product.
const gemmSample = 250 * time.Millisecond

// gemmSampler times a product out (n, oc) = inp (n, c) · w (oc, c)ᵀ on the engine's backend
// by a kernel: the engine's batch-invariant MatMul, OpenBLAS on the CPU backend's pool, or
// cuBLAS on a GPU.
func gemmSampler(be backend.Backend, kernel string, n, c, oc int) sampler {
	r := rand.New(rand.NewPCG(3, 3))
	buf := func(n int) backend.Buf {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		b := be.Alloc(n)
		be.Upload(b, v)
		return b
	}
	inp, w, out, reps := buf(n*c), buf(oc*c), be.Alloc(n*oc), 1
	name, one := "MatMul", func() { be.MatMul(out, inp, w, backend.Buf{}, n, c, oc) }
	enter, leave := func() {}, func() {}
	type blas interface {
		BLASMatMul(out, inp, w backend.Buf, n, c, oc int)
	}
	if bp, ok := be.(blas); ok && strings.HasPrefix(kernel, "openblas") {
		_, fam, _ := strings.Cut(kernel, "_") // openblas_<family>: that family, not the engine's
		own := cpu.BLASCoreName()
		name, one = "OpenBLAS "+cpu.SetBLASCore(cmp.Or(fam, own)), func() { bp.BLASMatMul(out, inp, w, n, c, oc) }
		enter, leave = func() { cpu.SetBLASCore(cmp.Or(fam, own)) }, func() { cpu.SetBLASCore(own) }
		leave()
	} else if ok {
		name += " " + cpu.Capability()
	} else if dd, ok := be.(interface{ Driver() launch.Driver }); ok && kernel == "cublas" {
		d, addr := dd.Driver(), func(x backend.Buf) uintptr { return x.M.Dev + 4*uintptr(x.Off) }
		name, one = "cuBLAS SGEMM", func() { // row-major out = inp·wᵀ is column-major outᵀ = w·inpᵀ
			d.Sgemm(true, false, oc, n, c, 1, addr(w), c, addr(inp), c, 0, addr(out), oc)
		}
	}
	g := sampler{fmt.Sprintf("%s, %d×%d · %d×%d", name, n, c, c, oc), func() sample {
		enter()
		defer leave()
		t := time.Now()
		for range reps {
			one()
		}
		finishBuf(be, out)
		return sample{ms: ms(time.Since(t)), work: 2 * float64(n*c*oc*reps) / 1e9}
	}}
	g.sample() // the first call of a shape packs, allocates and, on a GPU, loads
	reps = max(1, int(math.Ceil(float64(gemmSample)/float64(time.Duration(g.sample().ms*1e6)+1))))
	return g
}

// fmaPeak is the machine's FMA peak: peak.c's independent FMAs on threads threads at once, in
// whichever of its AVX-512 kernel (where ROOKSCRIPT_CPU_CAPABILITY allows it) and its AVX2 one
// runs faster; none without FMA.
func fmaPeak(threads int) sampler {
	gflops := func(lanes int, d time.Duration) float64 {
		return float64(C.rk_fma_peak(C.int(threads), C.int(lanes), C.int(d.Milliseconds()))) / 1e9
	}
	lanes, isa := 8, "AVX2"
	if !cpu.Capped() && gflops(16, 20*time.Millisecond) > gflops(8, 20*time.Millisecond) {
		lanes, isa = 16, "AVX-512"
	}
	if gflops(lanes, 20*time.Millisecond) == 0 {
		return sampler{}
	}
	return sampler{fmt.Sprintf("FMA peak: independent %s FMAs on %d threads", isa, threads), func() sample {
		t, g := time.Now(), gflops(lanes, gemmSample)
		d := ms(time.Since(t))
		return sample{ms: d, work: g * d / 1e3} // rate() gives g
	}}
}

// finishBuf waits until the device has done the work queued on it.
func finishBuf(be backend.Backend, b backend.Buf) { be.Download(make([]float32, 1), b.Slice(0, 1)) }

// bandwidthBytes is what a bandwidth sample reads: far more than any cache.
const bandwidthBytes = 1 << 30

// memReader reads a buffer of the engine's allocator (huge pages where the engine has them)
// on threads goroutines, eight independent sums each so that loads, not adds, set the pace.
func memReader(threads int) sampler {
	f := cpu.HostFloats(bandwidthBytes / 4)
	buf, per := unsafe.Slice((*uint64)(unsafe.Pointer(&f[0])), len(f)/2), len(f)/2/threads
	for i := range buf { // every page touched before any timing
		buf[i] = uint64(i)
	}
	return sampler{fmt.Sprintf("memory read bandwidth, %d threads", threads), func() sample {
		t, sums := time.Now(), make([]uint64, threads)
		var wg sync.WaitGroup
		for k := range threads {
			wg.Go(func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				p := buf[k*per : (k+1)*per]
				var a, b, c, d, e, f, g, h uint64
				for i := 0; i+8 <= len(p); i += 8 {
					a, b, c, d = a+p[i], b+p[i+1], c+p[i+2], d+p[i+3]
					e, f, g, h = e+p[i+4], f+p[i+5], g+p[i+6], h+p[i+7]
				}
				sums[k] = a + b + c + d + e + f + g + h
			})
		}
		wg.Wait() // the sums stored keep the loads
		return sample{ms: ms(time.Since(t)), work: bandwidthBytes / 1e9}
	}}
}

// devCopy is a device's bandwidth: Copy between two 1 GiB buffers, bytes read and written.
func devCopy(be backend.Backend) sampler {
	src, dst := be.Alloc(bandwidthBytes/4), be.Alloc(bandwidthBytes/4)
	return sampler{"device copy bandwidth, read + written", func() sample {
		t := time.Now()
		for range 20 {
			be.Copy(dst, src)
		}
		finishBuf(be, dst)
		return sample{ms: ms(time.Since(t)), work: 2 * 20 * bandwidthBytes / 1e9}
	}}
}
