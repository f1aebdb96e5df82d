package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
)

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
	switch {
	case len(s.v) == 0:
		return math.NaN()
	case highest:
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
	type blas interface {
		BLASMatMul(out, inp, w backend.Buf, n, c, oc int)
	}
	if bp, ok := be.(blas); ok && kernel == "openblas" {
		name, one = "OpenBLAS "+cpu.BLASCoreName(), func() { bp.BLASMatMul(out, inp, w, n, c, oc) }
	} else if ok {
		name += " " + cpu.Capability()
	} else if dd, ok := be.(interface{ Driver() launch.Driver }); ok && kernel == "cublas" {
		d, addr := dd.Driver(), func(x backend.Buf) uintptr { return x.M.Dev + 4*uintptr(x.Off) }
		name, one = "cuBLAS SGEMM", func() { // row-major out = inp·wᵀ is column-major outᵀ = w·inpᵀ
			d.Sgemm(true, false, oc, n, c, 1, addr(w), c, addr(inp), c, 0, addr(out), oc)
		}
	}
	g := sampler{fmt.Sprintf("%s, %d×%d · %d×%d", name, n, c, c, oc), func() sample {
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

// finishBuf waits until the device has done the work queued on it.
func finishBuf(be backend.Backend, b backend.Buf) { be.Download(make([]float32, 1), b.Slice(0, 1)) }

// bandwidthBytes is what a bandwidth sample reads: far more than any cache.
const bandwidthBytes = 1 << 30

// memReader reads a buffer of the engine's allocator (huge pages where the engine has them)
// on threads goroutines, eight independent sums each so that loads, not adds, set the pace.
func memReader(threads int) sampler {
	f := cpu.HostFloats(bandwidthBytes / 4)
	buf, per, sink := unsafe.Slice((*uint64)(unsafe.Pointer(&f[0])), len(f)/2), len(f)/2/threads, uint64(0)
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
		wg.Wait()
		for _, v := range sums {
			sink += v
		}
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
