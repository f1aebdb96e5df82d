package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
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

// BenchmarkGemmSmall: the small-row kernel against OpenBLAS, one thread, at a decode step's
// shapes (rows × in × out), in GFLOP per CPU-second of the thread.
func BenchmarkGemmSmall(b *testing.B) {
	for _, s := range []struct{ m, k, n int }{{64, 768, 2304}, {64, 768, 768}, {64, 768, 3072}, {64, 3072, 768}, {8, 768, 3072}, {160, 768, 4096}, {64, 768, 8192}, {768, 768, 3072}, {2304, 3072, 768}} {
		r := rand.New(rand.NewPCG(1, 2))
		a, w, out := randVec(r, s.m*s.k, 1), randVec(r, s.n*s.k, 1), make([]float32, s.m*s.n)
		flop := 2 * float64(s.m*s.k*s.n)
		for _, v := range []struct {
			name string
			f    func()
		}{
			{"small", func() { cGemmNT(out, nil, a, w, nil, s.m, 0, s.n, s.k, s.k, s.k, s.n, false) }},
			{"openblas", func() { sgemm(false, true, s.m, s.n, s.k, 1, a, s.k, w, s.k, 0, out, s.n) }},
		} {
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

// TestGemmNTMatchesReference: the AVX-512 kernel and its portable C arithmetic agree bit for
// bit, on shapes with ragged row tiles, column tiles and a masked last vector, for column
// ranges that start anywhere, with and without a bias and a residual (a buffer of its own, or
// the output itself); k above the blocking threshold (whole blocks, a ragged last block, a
// last block of one masked vector) and more rows than one row block holds at that k.
func TestGemmNTMatchesReference(t *testing.T) {
	if !hasAVX512() {
		t.Skip("processor has no AVX-512: MatMul runs OpenBLAS")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, s := range []struct{ m, k, n, j0, j1 int }{
		{1, 1, 1, 0, 1}, {13, 37, 11, 0, 11}, {6, 16, 8, 3, 8}, {7, 48, 9, 1, 6}, {64, 768, 70, 5, 70}, {400, 301, 17, 0, 17},
		{64, 3072, 9, 0, 9}, {11, 1537, 13, 2, 13}, {8, 2311, 6, 1, 6}, {130, 1800, 5, 0, 5},
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
			vec, ref := append([]float32(nil), base...), append([]float32(nil), base...)
			resVec, resRef := []float32(nil), []float32(nil)
			switch v.res {
			case "own":
				resVec, resRef = own, own
			case "out":
				resVec, resRef = vec, ref
			}
			cGemmNT(vec, resVec, a, w, bias, s.m, s.j0, s.j1, s.k, s.k, s.k, s.n, false)
			cGemmNT(ref, resRef, a, w, bias, s.m, s.j0, s.j1, s.k, s.k, s.k, s.n, true)
			for i := range vec {
				if math.Float32bits(vec[i]) != math.Float32bits(ref[i]) {
					t.Fatalf("%+v %+v: element %d = %v, portable %v", s, v, i, vec[i], ref[i])
				}
			}
			for i := range s.m {
				for j := range s.n {
					if (j < s.j0 || j >= s.j1) && vec[i*s.n+j] != base[i*s.n+j] {
						t.Fatalf("%+v: column %d outside [%d, %d) was written", s, j, s.j0, s.j1)
					}
				}
			}
			if v.res == "" && !v.bias {
				continue
			}
			// The fused residual and bias round as a separate pass would: res + (bias + a·w).
			plain := append([]float32(nil), base...)
			cGemmNT(plain, nil, a, w, nil, s.m, s.j0, s.j1, s.k, s.k, s.k, s.n, true)
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
					if math.Float32bits(x) != math.Float32bits(vec[i*s.n+j]) {
						t.Fatalf("%+v %+v: element (%d, %d) = %v, the separate passes give %v", s, v, i, j, vec[i*s.n+j], x)
					}
				}
			}
		}
	}
}

// TestMatMulKernelsAgree: MatMul through the packing-free kernel and through OpenBLAS (the
// path of machines without AVX-512) agree within 1e-5 of the output's scale, bias or not,
// and the kernel's result does not depend on the thread count.
func TestMatMulKernelsAgree(t *testing.T) {
	if !hasAVX512() {
		t.Skip("processor has no AVX-512: MatMul runs OpenBLAS only")
	}
	defer func() { useNT = true }()
	r := rand.New(rand.NewPCG(13, 14))
	for _, s := range []struct{ n, ch, oc int }{{5, 9, 7}, {64, 768, 2304}, {ntMaxRows, 67, 1030}, {37, 40, 2125}} {
		inp, w, b := randVec(r, s.n*s.ch, 1), randVec(r, s.oc*s.ch, 1), randVec(r, s.oc, 1)
		var first []float32
		for _, threads := range []int{1, 2, 3} {
			for _, bias := range []bool{false, true} {
				c := New(threads)
				bb := backend.Buf{}
				if bias {
					bb = buf(c, b)
				}
				run := func(nt bool) []float32 {
					useNT = nt
					o := c.Alloc(s.n * s.oc)
					c.MatMul(o, buf(c, inp), buf(c, w), bb, s.n, s.ch, s.oc)
					return o.F32()
				}
				got, blas := run(true), run(false)
				scale := 0.0
				for _, v := range blas {
					scale = max(scale, math.Abs(float64(v)))
				}
				for i := range got {
					if d := math.Abs(float64(got[i] - blas[i])); d > 1e-5*scale {
						t.Fatalf("%+v bias %v: output element %d = %v, OpenBLAS %v", s, bias, i, got[i], blas[i])
					}
				}
				if bias {
					continue
				}
				if first == nil {
					first = got
				} else if i := firstDiff(got, first); i >= 0 {
					t.Fatalf("%+v: %d threads: output element %d differs from 1 thread", s, threads, i)
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
// Add or GELU gives, through the packing-free kernel (whose parts fuse them) and through
// OpenBLAS (which leaves them to a separate pass), at thread counts that split the columns
// differently.
func TestMatMulFusedAsSeparate(t *testing.T) {
	defer func() { useNT = hasAVX512() }()
	r := rand.New(rand.NewPCG(15, 16))
	for _, s := range []struct{ n, ch, oc int }{{5, 9, 7}, {64, 768, 768}, {64, 3072, 768}, {64, 768, 3072}, {ntMaxRows + 1, 67, 300}} {
		inp, w, b, res := randVec(r, s.n*s.ch, 1), randVec(r, s.oc*s.ch, 1), randVec(r, s.oc, 1), randVec(r, s.n*s.oc, 1)
		for _, nt := range []bool{false, true} {
			if nt && !hasAVX512() {
				continue
			}
			for _, threads := range []int{1, 3} {
				useNT = nt
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
						t.Fatalf("%+v nt %v threads %d: %s element %d = %v, the separate passes give %v", s, nt, threads, v.name, i, v.got[i], v.want[i])
					}
				}
			}
		}
	}
}

// TestMatMulAddRefusesOverlap: a residual that shares elements with the output is refused on
// both paths (OpenBLAS's writes the output before it adds), whole or in part.
func TestMatMulAddRefusesOverlap(t *testing.T) {
	defer func() { useNT = hasAVX512() }()
	r := rand.New(rand.NewPCG(17, 18))
	const n, ch, oc = 4, 8, 16
	for _, nt := range []bool{false, true} {
		useNT = nt && hasAVX512()
		c := New(2)
		x, w, both := buf(c, randVec(r, n*ch, 1)), buf(c, randVec(r, oc*ch, 1)), c.Alloc(n*oc+oc)
		for name, res := range map[string]backend.Buf{"the output itself": both.Slice(0, n*oc), "shifted by a row": both.Slice(oc, n*oc)} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("nt %v: a residual that is %s was accepted", nt, name)
					}
				}()
				c.MatMulAdd(both.Slice(0, n*oc), res, x, w, backend.Buf{}, n, ch, oc)
			}()
		}
	}
}
