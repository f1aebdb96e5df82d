package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestVectorPathsMatchScalar: the sixteen-lane (AVX-512), AVX2 and scalar paths of every C
// kernel give bit-identical results, on values that stress exp's clamping and on lengths that
// leave a ragged tail: 1003 ends with a group of eight after the last sixteen, then three;
// 1011 with three after the last sixteen.
func TestVectorPathsMatchScalar(t *testing.T) {
	if !hasAVX2() {
		t.Skip("processor has no AVX2: only the scalar path exists here")
	}
	defer setAVX2(true)
	defer setAVX512(true)
	defer setDecode16(true)
	setDecode16(false) // decode attention's AVX2 path, against its scalar one
	for _, n := range []int{1003, 1011} {
		vectorPathsMatchScalar(t, n)
	}
}

func vectorPathsMatchScalar(t *testing.T, n int) {
	r := rand.New(rand.NewPCG(21, uint64(n)))
	x, y := randVec(r, n, 4), randVec(r, n, 1)
	x[5], x[77], x[300] = 60, -60, 1e-30
	nan := float32(math.NaN())
	xn := append([]float32(nil), x...)
	xn[9] = nan

	type result [][]float32
	run := func() result {
		var res result
		o := make([]float32, n)
		cGELU(o, x)
		res = append(res, append([]float32(nil), o...))
		cGELU(o, xn)
		res = append(res, append([]float32(nil), o...))
		cGELUBackward(o, x, y)
		res = append(res, append([]float32(nil), o...))
		p, m, v := append([]float32(nil), x...), append([]float32(nil), y...), make([]float32, n)
		for i := range v {
			v[i] = y[i] * y[i]
		}
		cAdamW(p, y, m, v, 0.9, 0.95, 1e-8, 0.999, 1e-3, 1.3)
		res = append(res, p, m, v)
		mx := cMaxScaled(x, 0.7)
		sums := make([]float64, 2)
		cExpSums(x, 0.7, mx, sums)
		s, tz := sums[0], sums[1]
		res = append(res, []float32{mx, float32(s), float32(tz), float32(s - float64(float32(s)))})
		sm := make([]float32, n)
		var smSum float64
		smMax := cSoftmax(sm, x, 0.7, &smSum)
		res = append(res, sm, []float32{smMax, float32(smSum), float32(smSum - float64(float32(smSum)))})
		const nh, hd, pos = 3, 20, 7 // hd not a multiple of 8: both paths run a tail
		att, attLse := make([]float32, nh*hd), make([]float32, nh)
		cAttentionDecode(att, y[:nh*hd], x[:3*nh*hd], x[500:500+3*nh*hd], 3, x[200:200+(pos-3)*nh*hd], x[700:700+(pos-3)*nh*hd], pos-3,
			nh, hd, nh*hd, 0.3, make([]float32, nh*pos), attLse)
		res = append(res, att, attLse)
		g := append([]float32(nil), x...)
		cLogProbBackward(g, 0.7, mx+float32(math.Log(s)), 0.3, -0.2, 1.1)
		res = append(res, g)
		res = append(res, []float32{cMaxScaled(xn, 0.7), cMaxScaled(xn[10:], 1)})
		// An attention block: 9 query rows seeing 11 prefix keys, then causally their own
		// (rows of 12 to 20 keys: both paths run tails), lse at a stride of 3.
		const ta, pa, ld = 9, 11, 37
		wa := pa + ta
		lse2 := make([]float32, 3*ta)
		for i := range lse2 {
			lse2[i] = 2 + y[i]
		}
		pr := append([]float32(nil), x[:ta*wa]...)
		cAttentionProbs(pr, ta, wa, pa, lse2, 3)
		ds := append([]float32(nil), y[:ta*wa]...)
		cAttentionDScores(ds, pr, ta, wa, pa, x[100:], y[200:], ld, 21)
		res = append(res, pr, ds)
		cs := append([]float32(nil), y[:45]...) // 32 columns in registers, 13 in the tail
		cColSums(cs, x, 17, 53)
		res = append(res, cs)
		return res
	}
	setAVX2(true)
	vec := run()
	setAVX512(false)
	avx2 := run()
	setAVX512(true)
	setAVX2(false)
	sc := run()
	setAVX2(true)
	for _, v := range []struct {
		name string
		got  result
	}{{"vector (AVX-512 where present)", vec}, {"AVX2", avx2}} {
		for k := range v.got {
			for i := range v.got[k] {
				a, b := v.got[k][i], sc[k][i]
				if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
					t.Fatalf("n %d: kernel output %d element %d: %s %v, scalar %v", n, k, i, v.name, a, b)
				}
			}
		}
	}
	if g := vec[1][9]; g == g {
		t.Fatalf("GELU(NaN) = %v, want NaN", g)
	}
	if m := vec[len(vec)-4]; m[0] == m[0] || m[1] != m[1] {
		t.Fatalf("max over a row with a NaN: %v, over one without: %v", m[0], m[1])
	}
}

// TestDecodeAttentionPaths: decode attention gives its portable reference's results bit for
// bit, log-sum-exps included, on every path the processor has — sixteen lanes (AVX-512),
// eight-float halves (AVX2 and FMA) and portable C — with head sizes that are and are not
// multiples of 16, a shared prefix or none, one position or many: a row attends alike on any
// x86-64 machine.
func TestDecodeAttentionPaths(t *testing.T) {
	has16, has8 := hasDecode16(), hasAVX2() && hasAVX2FMA()
	defer setDecode16(true)
	defer setAVX2(true)
	r := rand.New(rand.NewPCG(25, 26))
	for _, c := range []struct{ nh, hd, n1, n2 int }{
		{12, 64, 80, 17}, {6, 64, 11, 5}, {3, 20, 3, 4}, {2, 72, 0, 1}, {4, 16, 33, 0}, {1, 5, 1, 40}, {5, 130, 7, 9}, {2, 64, 9, 0},
	} {
		ld := c.nh*c.hd + 3
		q := randVec(r, c.nh*c.hd, 1)
		k1, v1 := randVec(r, max(c.n1, 1)*ld, 1), randVec(r, max(c.n1, 1)*ld, 1)
		k2, v2 := randVec(r, max(c.n2, 1)*ld, 1), randVec(r, max(c.n2, 1)*ld, 1)
		run := func(f func(out, q, k1, v1 []float32, n1 int, k2, v2 []float32, n2, nh, hd, ld int, scale float32, scratch, lse []float32)) []float32 {
			out := make([]float32, c.nh*c.hd+c.nh)
			f(out[:c.nh*c.hd], q, k1, v1, c.n1, k2, v2, c.n2, c.nh, c.hd, ld, 0.35, make([]float32, c.nh*(c.n1+c.n2)), out[c.nh*c.hd:])
			return out
		}
		want := run(cAttentionDecodeRef)
		for _, p := range []struct {
			name           string
			present        bool
			decode16, avx2 bool
		}{
			{"sixteen lanes", has16, true, true},
			{"AVX2 halves", has8, false, true},
			{"portable", true, false, false},
		} {
			if !p.present {
				continue
			}
			setDecode16(p.decode16)
			setAVX2(p.avx2)
			if got := run(cAttentionDecode); firstDiff(got, want) >= 0 {
				i := firstDiff(got, want)
				t.Fatalf("%+v, %s: element %d is %v, the reference's %v", c, p.name, i, got[i], want[i])
			}
		}
	}
}

// TestAttentionRowsMatchDecode: the training forward's rows, several at once, are bit for
// bit what decode attention gives each row alone (DESIGN §6.1) — outputs and log-sum-exps —
// with heads of 16 to 64 channels (where rows share their loads) and of other sizes, groups of 1 to 4 rows,
// with a prefix or none, in the sixteen-lane path and in the AVX2 one.
func TestAttentionRowsMatchDecode(t *testing.T) {
	defer setDecode16(true)
	r := rand.New(rand.NewPCG(27, 28))
	for _, c := range []struct{ nh, hd, n1, n, rows int }{
		{12, 64, 79, 80, 4}, {5, 64, 0, 1, 4}, {3, 64, 17, 20, 3}, {2, 64, 0, 33, 2}, {7, 64, 40, 41, 1}, {4, 32, 30, 31, 4},
		{3, 16, 0, 18, 4}, {2, 48, 5, 9, 2}, {3, 20, 5, 6, 4}, {2, 72, 0, 3, 3},
	} {
		ld := 3*c.nh*c.hd + 5
		pre := randVec(r, max(c.n1, 1)*ld, 1)
		own := randVec(r, (c.n-c.n1+c.rows)*ld, 1)
		q := own[(c.n-c.n1-1)*ld:] // the rows' queries: own rows n − n1 − 1 on
		for _, on := range []bool{true, false} {
			setDecode16(on)
			got, lse := make([]float32, c.rows*ld), make([]float32, c.rows*c.nh)
			cAttentionRows(got, ld, q, ld, c.rows, pre, pre[c.nh*c.hd:], c.n1, own, own[c.nh*c.hd:], c.n, c.nh, c.hd, ld, 0.125,
				make([]float32, 4*c.nh*(c.n+c.rows)), lse)
			for i := range c.rows {
				want, wantLse := make([]float32, c.nh*c.hd), make([]float32, c.nh)
				cAttentionDecode(want, q[i*ld:], pre, pre[c.nh*c.hd:], c.n1, own, own[c.nh*c.hd:], c.n+i-c.n1, c.nh, c.hd, ld, 0.125,
					make([]float32, c.nh*(c.n+i)), wantLse)
				if k := firstDiff(got[i*ld:i*ld+c.nh*c.hd], want); k >= 0 {
					t.Fatalf("%+v, sixteen lanes %v: row %d element %d = %v, decoded alone %v", c, on, i, k, got[i*ld+k], want[k])
				}
				if k := firstDiff(lse[i*c.nh:(i+1)*c.nh], wantLse); k >= 0 {
					t.Fatalf("%+v, sixteen lanes %v: row %d head %d log-sum-exp %v, decoded alone %v", c, on, i, k, lse[i*c.nh+k], wantLse[k])
				}
			}
		}
	}
}

// BenchmarkDecodeAttention: one GPT-2 124M decode row (12 heads of 64 channels) over a
// shared prompt of 80 positions and 32 positions of its own, in the fastest path present.
func BenchmarkDecodeAttention(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	nh, hd, n1, n2, ld := 12, 64, 80, 32, 768
	q := randVec(r, nh*hd, 1)
	k1, v1 := randVec(r, n1*ld, 1), randVec(r, n1*ld, 1)
	k2, v2 := randVec(r, n2*ld, 1), randVec(r, n2*ld, 1)
	out, scratch := make([]float32, nh*hd), make([]float32, nh*(n1+n2))
	for range b.N {
		cAttentionDecode(out, q, k1, v1, n1, k2, v2, n2, nh, hd, ld, 0.125, scratch, nil)
	}
}
