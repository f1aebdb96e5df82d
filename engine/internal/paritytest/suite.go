package paritytest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cpu"
)

// Tol bounds the error of each element: |got − want| ≤ Abs + Rel·|want|, with want from the
// CPU backend. Rel also absorbs the different summation orders of reductions and GEMMs.
type Tol struct{ Abs, Rel float64 }

// Tolerances, stated once. fp32 kernels with the same formula differ by a few ulp (exp
// implementations); reductions by their order; whole-model results by both, compounded.
var (
	TolExact   = Tol{0, 0}       // data movement: bit for bit
	TolElem    = Tol{1e-7, 4e-6} // elementwise math with exp (GELU, AdamW, log-softmax backward)
	TolReduce  = Tol{1e-6, 2e-5} // row reductions: LayerNorm, softmax, attention, GEMM
	TolModel   = Tol{2e-5, 2e-4} // whole-model outputs (log-probabilities, logits)
	TolGrad    = 2e-4            // whole-model gradients, relative to each tensor's largest
	TolDecode  = 1e-4            // KV-cache logprob vs training forward (DESIGN invariant 2)
	TolAdamLRs = 0.02            // AdamW parameter change, in units of the learning rate
	// A GRPO step's metrics. A ratio exp(logp − old) moves relatively by its logprob's
	// error, which TolModel bounds by ~1e-3 at |logp| ≈ 5 (log 67 ≈ 4.2): Rel. The loss is a
	// sum of O(1) terms of both signs (advantages are zero-mean per group) and moves by about
	// one logprob error whatever its own size: Abs, 5× TolModel's absolute part.
	TolMetric = Tol{1e-4, 1e-3}
)

// Suite is the comparison of one device backend with the CPU backend.
type Suite struct {
	Dev backend.Backend
	Ref *cpu.CPU
}

// Run runs every check as a subtest.
func Run(t *testing.T, dev backend.Backend) {
	s := Suite{Dev: dev, Ref: cpu.New(2)}
	for _, c := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"Memory", s.Memory},
		{"Elementwise", s.Elementwise},
		{"GELU", s.GELU},
		{"Rows", s.Rows},
		{"Encoder", s.Encoder},
		{"LayerNorm", s.LayerNorm},
		{"MatMul", s.MatMul},
		{"Attention", s.Attention},
		{"AttentionDecode", s.AttentionDecode},
		{"LogProbs", s.LogProbs},
		{"Softmax", s.Softmax},
		{"Sample", s.Sample},
		{"AdamW", s.AdamW},
		{"SumSquares", s.SumSquares},
		{"SumSquaresMany", s.SumSquaresMany},
		{"Determinism", s.Determinism},
		{"GRPOStep", s.GRPOStep},
		{"FusedHead", s.FusedHead},
		{"Decode", s.Decode},
		{"Sampler", s.Sampler},
		{"TrainerStep", s.TrainerStep},
	} {
		t.Run(c.name, c.f)
	}
}

// Helpers: the same data on both backends.

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

func put(b backend.Backend, v []float32) backend.Buf {
	x := b.Alloc(len(v))
	b.Upload(x, v)
	return x
}

func putI(b backend.Backend, v []int32) backend.I32 {
	x := b.AllocI32(len(v))
	b.UploadI32(x, v)
	return x
}

func get(b backend.Backend, x backend.Buf) []float32 {
	out := make([]float32, x.N)
	b.Download(out, x)
	return out
}

// pair holds one buffer on each backend.
type pair struct{ d, r backend.Buf }

func (s Suite) pair(v []float32) pair { return pair{put(s.Dev, v), put(s.Ref, v)} }

func (s Suite) zeros(n int) pair { return pair{s.Dev.Alloc(n), s.Ref.Alloc(n)} }

type ipair struct{ d, r backend.I32 }

func (s Suite) ipair(v []int32) ipair { return ipair{putI(s.Dev, v), putI(s.Ref, v)} }

// compare checks got against want within tol and logs the worst error.
func compare(t *testing.T, what string, got, want []float32, tol Tol) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	worst, at := 0.0, -1
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(w) || math.IsInf(w, 0) {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(math.IsNaN(g) && math.IsNaN(w)) {
				t.Fatalf("%s[%d] = %g, want %g", what, i, g, w)
			}
			continue
		}
		e := math.Abs(g - w)
		lim := tol.Abs + tol.Rel*math.Abs(w)
		if !(e <= lim) { // NaN fails too
			t.Errorf("%s[%d] = %.9g, want %.9g (error %.3g > %.3g)", what, i, g, w, e, lim)
			return
		}
		if lim > 0 && e/lim > worst {
			worst, at = e/lim, i
		}
	}
	t.Logf("%s: %d values, worst error %.2f of tolerance (at %d)", what, len(got), worst, at)
}

// compareBufs downloads p from both backends and compares them.
func (s Suite) compareBufs(t *testing.T, what string, p pair, tol Tol) {
	t.Helper()
	compare(t, what, get(s.Dev, p.d), get(s.Ref, p.r), tol)
}

// compareScaled checks got against want relative to want's largest magnitude: the right
// measure for gradients, whose small elements are differences of large terms.
func compareScaled(t *testing.T, what string, got, want []float32, rel float64) {
	t.Helper()
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	if scale == 0 {
		scale = 1
	}
	worst := 0.0
	for i := range got {
		e := math.Abs(float64(got[i])-float64(want[i])) / scale
		if !(e <= rel) {
			t.Errorf("%s[%d] = %.9g, want %.9g (error %.3g of max |want| %.3g)", what, i, got[i], want[i], e, scale)
			return
		}
		worst = max(worst, e)
	}
	t.Logf("%s: worst error %.2g of max |want| %.3g", what, worst, scale)
}

// compareScaledBufs compares p's two sides relative to the largest magnitude, within
// TolReduce.Rel: GEMM outputs are sums of products of both signs, so their small elements
// carry the rounding of the large terms.
func (s Suite) compareScaledBufs(t *testing.T, what string, p pair) {
	t.Helper()
	compareScaled(t, what, get(s.Dev, p.d), get(s.Ref, p.r), TolReduce.Rel)
}

func bitsEqual(t *testing.T, what string, a, b []float32) {
	t.Helper()
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: element %d differs: %v vs %v", what, i, a[i], b[i])
		}
	}
}

func name(format string, args ...any) string { return fmt.Sprintf(format, args...) }
