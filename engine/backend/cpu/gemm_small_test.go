package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
)

// threadCPU is the calling thread's CPU time in seconds: on a shared machine, a rate per
// CPU-second measures the kernel rather than the load.
func threadCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkGemmSmall: the product kernel (without and with its copies of blocks, and its AVX2
// version where the processor has more) against OpenBLAS, one thread, at a decode step's and a training forward's shapes (rows × in × out),
// in GFLOP per CPU-second of the thread.
func BenchmarkGemmSmall(b *testing.B) {
	for _, s := range []struct{ m, k, n int }{{64, 768, 2304}, {64, 768, 768}, {64, 768, 3072}, {64, 3072, 768}, {8, 768, 3072}, {160, 768, 4096}, {64, 768, 8192}, {256, 768, 3072}, {256, 3072, 768}, {768, 768, 3072}, {2304, 3072, 768}} {
		r := rand.New(rand.NewPCG(1, 2))
		a, w, out := randVec(r, s.m*s.k, 1), randVec(r, s.n*s.k, 1), make([]float32, s.m*s.n)
		scratch := make([]float32, ntScratch(s.k))
		flop := 2 * float64(s.m*s.k*s.n)
		SetBLASThreads(1)
		type variant struct {
			name string
			f    func()
		}
		variants := []variant{
			{"small", func() { cGemmNT(out, nil, a, w, nil, s.m, 0, s.n, s.k, s.k, s.k, s.n, ntUse, nil) }},
			{"copied", func() { cGemmNT(out, nil, a, w, nil, s.m, 0, s.n, s.k, s.k, s.k, s.n, ntUse, scratch) }},
			{"openblas", func() { sgemm(false, true, s.m, s.n, s.k, 1, a, s.k, w, s.k, 0, out, s.n) }},
		}
		if ntUse > ntAVX2 { // the AVX2 kernel, as a processor without AVX-512 runs it
			variants = append(variants, variant{"avx2", func() { cGemmNT(out, nil, a, w, nil, s.m, 0, s.n, s.k, s.k, s.k, s.n, ntAVX2, nil) }})
		}
		for _, v := range variants {
			b.Run(fmt.Sprintf("%s/%dx%dx%d", v.name, s.m, s.k, s.n), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				t0 := threadCPU()
				for b.Loop() {
					v.f()
				}
				b.ReportMetric(flop*float64(b.N)/(threadCPU()-t0)/1e9, "GFLOP/cpu-s")
			})
		}
	}
}

// ntKernels are the product kernels this processor runs, the portable one last.
func ntKernels() []ntKernel {
	var ks []ntKernel
	for k := bestNTKernel(); k > ntPortable; k-- {
		ks = append(ks, k)
	}
	return append(ks, ntPortable)
}

// TestGemmNTMatchesReference: every vector kernel (the AVX-512 one with and without its
// copies of blocks, the AVX2 one) and the portable C arithmetic agree bit for bit, on shapes
// with ragged row tiles, column tiles and a masked last vector, for column ranges that start
// anywhere, with and without a bias and a residual (a buffer of its own, or the output
// itself); k above the blocking threshold (in blocks where the kernel copies them: whole
// blocks, a ragged last block, a last block of one masked vector, 3072 whose rows are a
// multiple of 4 KB apart; whole where it does not) and more rows than one row block holds at
// that k; and more columns than the AVX2 kernel's column block holds.
func TestGemmNTMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	type variant struct {
		kern    ntKernel
		scratch bool
	}
	var variants []variant
	for _, k := range ntKernels()[:len(ntKernels())-1] {
		variants = append(variants, variant{k, false})
		if k == ntAVX512 {
			variants = append(variants, variant{k, true})
		}
	}
	if len(variants) == 0 {
		t.Skip("processor has neither AVX-512 nor AVX2 with FMA: only the portable kernel runs")
	}
	for _, s := range []struct{ m, k, n, j0, j1 int }{
		{1, 1, 1, 0, 1}, {13, 37, 11, 0, 11}, {6, 16, 8, 3, 8}, {7, 48, 9, 1, 6}, {64, 768, 70, 5, 70}, {400, 301, 17, 0, 17},
		{64, 3072, 9, 0, 9}, {11, 1537, 13, 2, 13}, {8, 2311, 6, 1, 6}, {130, 1800, 5, 0, 5}, {203, 3072, 14, 1, 14}, {262, 768, 10, 0, 10},
		{8, 768, 14, 1, 14}, {8, 1000, 7, 0, 7}, {8, 1024, 5, 0, 5}, {8, 1025, 4, 0, 4}, {56, 3072, 11, 0, 11}, {20, 768, 300, 7, 292},
	} {
		a, w := randVec(r, s.m*s.k, 1), randVec(r, s.n*s.k, 1)
		for _, v := range []struct {
			res  string // "", "own" or "out"
			bias bool
		}{{"", false}, {"own", false}, {"out", false}, {"", true}, {"own", true}, {"out", true}} {
			var bias []float32
			if v.bias {
				bias = randVec(r, s.n, 1)
			}
			base, own := randVec(r, s.m*s.n, 1), randVec(r, s.m*s.n, 1)
			ref := append([]float32(nil), base...)
			resRef := []float32(nil)
			switch v.res {
			case "own":
				resRef = own
			case "out":
				resRef = ref
			}
			cGemmNT(ref, resRef, a, w, bias, s.m, s.j0, s.j1, s.k, s.k, s.k, s.n, ntPortable, nil)
			for _, kv := range variants {
				vec := append([]float32(nil), base...)
				resVec := []float32(nil)
				switch v.res {
				case "own":
					resVec = own
				case "out":
					resVec = vec
				}
				var scratch []float32
				if kv.scratch {
					scratch = make([]float32, ntScratch(s.k))
				}
				cGemmNT(vec, resVec, a, w, bias, s.m, s.j0, s.j1, s.k, s.k, s.k, s.n, kv.kern, scratch)
				if i := firstDiff(vec, ref); i >= 0 {
					t.Fatalf("%+v %+v %v (copies %v): element %d = %v, portable %v", s, v, kv.kern, kv.scratch, i, vec[i], ref[i])
				}
				for i := range s.m {
					for j := range s.n {
						if (j < s.j0 || j >= s.j1) && vec[i*s.n+j] != base[i*s.n+j] {
							t.Fatalf("%+v %v: column %d outside [%d, %d) was written", s, kv.kern, j, s.j0, s.j1)
						}
					}
				}
			}
			if v.res == "" && !v.bias {
				continue
			}
			// The fused residual and bias round as a separate pass would: res + (bias + a·w).
			plain := append([]float32(nil), base...)
			cGemmNT(plain, nil, a, w, nil, s.m, s.j0, s.j1, s.k, s.k, s.k, s.n, ntPortable, nil)
			for i := range s.m {
				for j := s.j0; j < s.j1; j++ {
					x := plain[i*s.n+j]
					if bias != nil {
						x = bias[j] + x
					}
					switch v.res {
					case "own":
						x = own[i*s.n+j] + x
					case "out":
						x = base[i*s.n+j] + x
					}
					if math.Float32bits(x) != math.Float32bits(ref[i*s.n+j]) {
						t.Fatalf("%+v %+v: element (%d, %d) = %v, the separate passes give %v", s, v, i, j, ref[i*s.n+j], x)
					}
				}
			}
		}
	}
}

// TestMatMulRowInvariance is DESIGN §6.1 for the products: a row's output is the same bits
// whatever the rows around it — alone, or among 7, 96, 97 or 300 rows (a decode step's
// product, a training batch's, past the row count where products once changed kernel) — on 1,
// 2 and 3 threads, bias or not, through every kernel the processor runs; and the result is
// the portable kernel's. Products of the forward at 124M's widths: 768 → 2304 and 3072 → 768
// (k whole up to 96 rows, in copied blocks from 97; rows 12 KB apart).
func TestMatMulRowInvariance(t *testing.T) {
	defer func() { ntUse = bestNTKernel() }()
	r := rand.New(rand.NewPCG(13, 14))
	for _, s := range []struct{ ch, oc int }{{9, 7}, {67, 1030}, {768, 2304}, {3072, 768}} {
		const rows = 300
		inp, w, b := randVec(r, rows*s.ch, 1), randVec(r, s.oc*s.ch, 1), randVec(r, s.oc, 1)
		// Row 5 of every batch is the probe row (the batches are its neighbours' prefixes).
		probe := inp[5*s.ch : 6*s.ch]
		alone := func(c *CPU, bb backend.Buf) []float32 {
			o := c.Alloc(s.oc)
			c.MatMul(o, buf(c, probe), buf(c, w), bb, 1, s.ch, s.oc)
			return o.F32()
		}
		var want []float32
		for _, kern := range ntKernels() {
			if kern == ntPortable && s.ch*s.oc > 100000 {
				continue // a minute at these sizes; the kernels are held to it above
			}
			ntUse = kern
			for _, threads := range []int{1, 2, 3} {
				c := New(threads)
				for _, bias := range []bool{false, true} {
					bb := backend.Buf{}
					if bias {
						bb = buf(c, b)
					}
					one := alone(c, bb)
					if !bias {
						if want == nil {
							want = one
						} else if i := firstDiff(one, want); i >= 0 {
							t.Fatalf("%+v %v, %d threads: the row alone differs at column %d from %v on 1 thread", s, kern, threads, i, ntKernels()[0])
						}
					}
					for _, n := range []int{7, 8, 56, 96, 97, rows} { // 8 and 48 + 8: blocks of the 8-row tiles
						o := c.Alloc(n * s.oc)
						c.MatMul(o, buf(c, inp[:n*s.ch]), buf(c, w), bb, n, s.ch, s.oc)
						if i := firstDiff(o.F32()[5*s.oc:6*s.oc], one); i >= 0 {
							t.Fatalf("%+v %v, %d threads, bias %v: row 5 of %d rows differs at column %d from the row alone: %v, %v",
								s, kern, threads, bias, n, i, o.F32()[5*s.oc+i], one[i])
						}
					}
				}
			}
		}
	}
}

func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestBLASKernelsForTheProcessor: once a backend exists, OpenBLAS runs kernels for the
// processor's vector width, not the SSE3 ones it falls back to for a model it does not know.
func TestBLASKernelsForTheProcessor(t *testing.T) {
	New(1)
	if os.Getenv("OPENBLAS_CORETYPE") != "" {
		t.Skip("OPENBLAS_CORETYPE is set: the user chose the kernels OpenBLAS runs, so there is no choice of ours to check")
	}
	if core := blasCoreName(); hasAVX2() && strings.EqualFold(core, "prescott") {
		t.Fatalf("OpenBLAS runs its %s kernels on a processor with AVX2", core)
	}
}

// TestMatMulFusedAsSeparate: MatMulAdd and MatMulGELU give bit for bit what MatMul followed by
// Add or GELU gives (the kernel's parts fuse them), through every vector kernel, at thread
// counts that split the columns differently.
func TestMatMulFusedAsSeparate(t *testing.T) {
	defer func() { ntUse = bestNTKernel() }()
	r := rand.New(rand.NewPCG(15, 16))
	for _, s := range []struct{ n, ch, oc int }{{5, 9, 7}, {64, 768, 768}, {64, 3072, 768}, {64, 768, 3072}, {ntCopyRows + 1, 67, 300}, {ntCopyRows + 3, 3072, 768}} {
		inp, w, b, res := randVec(r, s.n*s.ch, 1), randVec(r, s.oc*s.ch, 1), randVec(r, s.oc, 1), randVec(r, s.n*s.oc, 1)
		for _, kern := range ntKernels()[:max(1, len(ntKernels())-1)] {
			for _, threads := range []int{1, 3} {
				ntUse = kern
				c := New(threads)
				x, wb, bb := buf(c, inp), buf(c, w), buf(c, b)
				plain, act, want := c.Alloc(s.n*s.oc), c.Alloc(s.n*s.oc), c.Alloc(s.n*s.oc)
				c.MatMul(plain, x, wb, bb, s.n, s.ch, s.oc)
				c.GELU(act, plain)
				c.Add(want, buf(c, res), plain)

				got := c.Alloc(s.n * s.oc)
				c.MatMulAdd(got, buf(c, res), x, wb, bb, s.n, s.ch, s.oc)
				pre, gelu := c.Alloc(s.n*s.oc), c.Alloc(s.n*s.oc)
				c.MatMulGELU(pre, gelu, x, wb, bb, s.n, s.ch, s.oc)
				for _, v := range []struct {
					name      string
					got, want []float32
				}{{"MatMulAdd", got.F32(), want.F32()}, {"MatMulGELU's product", pre.F32(), plain.F32()}, {"MatMulGELU", gelu.F32(), act.F32()}} {
					if i := firstDiff(v.got, v.want); i >= 0 {
						t.Fatalf("%+v %v threads %d: %s element %d = %v, the separate passes give %v", s, kern, threads, v.name, i, v.got[i], v.want[i])
					}
				}
			}
		}
	}
}

// TestMatMulAddRefusesOverlap: a residual that shares elements with the output is refused
// (the interface's contract: a backend may write the output before it reads the residual),
// whole or in part.
func TestMatMulAddRefusesOverlap(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	const n, ch, oc = 4, 8, 16
	c := New(2)
	x, w, both := buf(c, randVec(r, n*ch, 1)), buf(c, randVec(r, oc*ch, 1)), c.Alloc(n*oc+oc)
	for name, res := range map[string]backend.Buf{"the output itself": both.Slice(0, n*oc), "shifted by a row": both.Slice(oc, n*oc)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("a residual that is %s was accepted", name)
				}
			}()
			c.MatMulAdd(both.Slice(0, n*oc), res, x, w, backend.Buf{}, n, ch, oc)
		}()
	}
}

// BenchmarkForwardProducts: MatMul (with bias) on the backend's pool of 2 workers at the
// products of a GRPO micro-batch's forward through GPT-2 124M (1198 rows: 2 prompts of 80
// tokens, each continued by 8 completions of 64) and of one LM-head chunk of 260 rows, and
// OpenBLAS (BLASMatMul, no bias) at the same shapes; in CPU milliseconds of the process per
// product (steadier than wall time on a shared machine) and GFLOP per wall second.
func BenchmarkForwardProducts(b *testing.B) {
	for _, s := range []struct{ n, ch, oc int }{{1198, 768, 2304}, {1198, 768, 768}, {1198, 768, 3072}, {1198, 3072, 768}, {260, 768, 50257}} {
		r := rand.New(rand.NewPCG(1, 2))
		c := New(2)
		inp, w, bias, out := buf(c, randVec(r, s.n*s.ch, 1)), buf(c, randVec(r, s.oc*s.ch, 1)), buf(c, randVec(r, s.oc, 1)), c.Alloc(s.n*s.oc)
		for _, v := range []struct {
			name string
			f    func()
		}{
			{"kernel", func() { c.MatMul(out, inp, w, bias, s.n, s.ch, s.oc) }},
			{"openblas", func() { c.BLASMatMul(out, inp, w, s.n, s.ch, s.oc) }},
		} {
			b.Run(fmt.Sprintf("%s/%dx%dx%d", v.name, s.n, s.ch, s.oc), func(b *testing.B) {
				v.f()
				c0 := processCPU()
				for b.Loop() {
					v.f()
				}
				b.ReportMetric((processCPU()-c0)*1e3/float64(b.N), "cpu-ms/op")
				b.ReportMetric(2*float64(s.n*s.ch*s.oc)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

func TestCutColumns(t *testing.T) {
	var j ntJob
	if p := j.cutColumns(768, true, 2); p != 7 || !slices.Equal(j.starts[:8], []int32{0, 192, 384, 512, 576, 640, 704, 768}) {
		t.Errorf("768 columns for 2 workers: %d parts %v", p, j.starts[:p+1])
	}
	if p := j.cutColumns(5000, false, 2); p != 1 || j.starts[0] != 0 || j.starts[1] != 5000 {
		t.Errorf("unsplit: %d parts %v", p, j.starts[:p+1])
	}
	for _, tc := range []struct{ n, workers int }{{1, 2}, {64, 2}, {100, 2}, {2304, 2}, {3072, 4}, {50257, 2}, {50257, 16}, {1 << 22, 2}} {
		p := j.cutColumns(tc.n, true, tc.workers)
		if p < 1 || p > ntMaxParts || j.starts[0] != 0 || int(j.starts[p]) != tc.n {
			t.Errorf("%d columns, %d workers: %d parts from %d to %d", tc.n, tc.workers, p, j.starts[0], j.starts[p])
			continue
		}
		for i := range p {
			size := j.starts[i+1] - j.starts[i]
			if size <= 0 || (i+1 < p && size%ntColumns != 0) {
				t.Errorf("%d columns, %d workers: part %d of %d columns", tc.n, tc.workers, i, size)
			}
			if i > 0 && i+1 < p && size > j.starts[i]-j.starts[i-1] {
				t.Errorf("%d columns, %d workers: part %d (%d columns) longer than the one before", tc.n, tc.workers, i, size)
			}
		}
	}
}

// BenchmarkWeightGradProducts: the weight gradients of GPT-2 124M's train step at B=4, T=64
// (256 rows), dW += dYᵀ·X, on the backend's pool of 2 workers: OpenBLAS as MatMulBackward runs
// it, against the forward's product kernel (nt), which needs dY and X transposed (tokens
// contiguous): with the transposes ("kernel"), without them ("kernel-nt", as if the forward
// had stored them so) and the transposes alone, on one goroutine ("transposes"). Units as
// BenchmarkForwardProducts's.
func BenchmarkWeightGradProducts(b *testing.B) {
	const n = 256
	for _, s := range []struct{ ch, oc int }{{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}, {768, 50257}} {
		r := rand.New(rand.NewPCG(3, 4))
		c := New(2)
		dy, x, dw := randVec(r, n*s.oc, 1), randVec(r, n*s.ch, 1), make([]float32, s.oc*s.ch)
		dyT, xT := make([]float32, s.oc*n), make([]float32, s.ch*n)
		transposes := func() {
			transpose(dyT, dy, n, s.oc)
			transpose(xT, x, n, s.ch)
		}
		nt := func() { c.nt(dw, dw, dyT, xT, nil, nil, s.oc, s.ch, n, n, n, s.ch) }
		transposes()
		for _, v := range []struct {
			name string
			f    func()
		}{
			{"openblas", func() { c.gemm(true, false, s.oc, s.ch, n, 1, dy, s.oc, x, s.ch, 1, dw, s.ch) }},
			{"kernel", func() { transposes(); nt() }},
			{"kernel-nt", nt},
			{"transposes", transposes},
		} {
			b.Run(fmt.Sprintf("%s/%dx%dx%d", v.name, n, s.ch, s.oc), func(b *testing.B) {
				v.f()
				c0 := processCPU()
				for b.Loop() {
					v.f()
				}
				b.ReportMetric((processCPU()-c0)*1e3/float64(b.N), "cpu-ms/op")
				b.ReportMetric(2*float64(n*s.ch*s.oc)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// transpose writes src (rows, cols) into dst (cols, rows), in tiles that stay in L1.
func transpose(dst, src []float32, rows, cols int) {
	const t = 32
	for i0 := 0; i0 < rows; i0 += t {
		for j0 := 0; j0 < cols; j0 += t {
			for i := i0; i < min(i0+t, rows); i++ {
				for j := j0; j < min(j0+t, cols); j++ {
					dst[j*rows+i] = src[i*cols+j]
				}
			}
		}
	}
}
