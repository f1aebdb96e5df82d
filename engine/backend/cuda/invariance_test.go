//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cuda/internal/invariance"
	"github.com/rookscript/rookscript/engine/backend/cuda/launch"
)

// TestBatchInvariance is DESIGN §6.1 on the GPU (package invariance): a row's forward product
// is the same bits in any batch, and the sampler's logprobs are the training forward's.
func TestBatchInvariance(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	invariance.Run(t, b)
}

// forwardShapes are a GRPO micro-batch's products through GPT-2 124M (rows × in × out).
var forwardShapes = [][3]int{{1198, 768, 2304}, {1198, 768, 768}, {1198, 768, 3072}, {1198, 3072, 768}, {260, 768, 50257}}

func dev(x backend.Buf) uintptr { return x.M.Dev + 4*uintptr(x.Off) }

// cublasNT is out = inp·wᵀ through cuBLAS, as MatMul ran it before it had its own kernel.
func cublasNT(d launch.Driver, out, inp, w backend.Buf, n, c, oc int) {
	d.Sgemm(true, false, oc, n, c, 1, dev(w), c, dev(inp), c, 0, dev(out), oc)
}

// TestCuBLASRowDependence measures what MatMul's own kernel is for: at each forward shape, row
// 5 computed alone and among all the rows, through cuBLAS (logged: the gap the sampler and the
// training forward had) and through MatMul (which must be none).
func TestCuBLASRowDependence(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range forwardShapes {
		n, c, oc := s[0], s[1], s[2]
		inp, w := invariance.RandBuf(b, r, n*c), invariance.RandBuf(b, r, oc*c)
		row := func(f func(out, inp backend.Buf, n int)) (alone, among []float32) {
			one, all := b.Alloc(oc), b.Alloc(n*oc)
			f(one, inp.Slice(5*c, c), 1)
			f(all, inp, n)
			alone, among = make([]float32, oc), make([]float32, oc)
			b.Download(alone, one)
			b.Download(among, all.Slice(5*oc, oc))
			return alone, among
		}
		gap := func(a, x []float32) (int, float64) {
			k, worst, scale := 0, 0.0, 0.0
			for i := range a {
				scale = max(scale, math.Abs(float64(a[i])))
				if math.Float32bits(a[i]) != math.Float32bits(x[i]) {
					k++
					worst = max(worst, math.Abs(float64(a[i]-x[i])))
				}
			}
			return k, worst / scale
		}
		ca, cx := row(func(out, in backend.Buf, m int) { cublasNT(b.Driver(), out, in, w, m, c, oc) })
		ma, mx := row(func(out, in backend.Buf, m int) { b.MatMul(out, in, w, backend.Buf{}, m, c, oc) })
		kc, wc := gap(ca, cx)
		km, wm := gap(ma, mx)
		t.Logf("%d×%d×%d: row 5 alone vs among %d rows: cuBLAS %d of %d columns differ (max |Δ| %.2g of the row's largest); MatMul %d", n, c, oc, n, kc, oc, wc, km)
		if km != 0 {
			t.Errorf("%d×%d×%d: MatMul's row 5 differs in %d columns (max |Δ| %.2g)", n, c, oc, km, wm)
		}
	}
}

// TestMatMulRate logs MatMul's own kernel against cuBLAS at the forward's shapes and a decode
// step's (64 rows), in TFLOP/s: the price of batch invariance on this GPU.
func TestMatMulRate(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	shapes := append([][3]int{{64, 768, 2304}, {64, 3072, 768}, {64, 768, 50257}}, forwardShapes...)
	for _, s := range shapes {
		n, c, oc := s[0], s[1], s[2]
		inp, w, out := invariance.RandBuf(b, r, n*c), invariance.RandBuf(b, r, oc*c), b.Alloc(n*oc)
		rate := func(f func()) float64 {
			f()
			var one [1]float32
			b.Download(one[:], out.Slice(0, 1))
			const reps = 20
			t0 := time.Now()
			for range reps {
				f()
			}
			b.Download(one[:], out.Slice(0, 1))
			return 2 * float64(n*c*oc) * reps / time.Since(t0).Seconds() / 1e12
		}
		own := rate(func() { b.MatMul(out, inp, w, backend.Buf{}, n, c, oc) })
		blas := rate(func() { cublasNT(b.Driver(), out, inp, w, n, c, oc) })
		t.Log(fmt.Sprintf("%d×%d×%d: MatMul %.2f TFLOP/s, cuBLAS %.2f TFLOP/s (%.2f×)", n, c, oc, own, blas, blas/own))
	}
}
