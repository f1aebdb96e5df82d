package paritytest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
)

// Sizes are chosen to miss every block size and chunk: flat kernels use blocks of 256 and
// SumSquares chunks of 65536; row kernels put 4 rows in a block and LayerNorm's backward 16.

// Memory: zeroed allocations, round trips, and views at odd offsets leaving neighbours alone.
func (s Suite) Memory(t *testing.T) {
	d := s.Dev
	x := d.Alloc(1001)
	for i, v := range get(d, x) {
		if v != 0 {
			t.Fatalf("Alloc: element %d = %g, want 0", i, v)
		}
	}
	r := rand.New(rand.NewPCG(1, 1))
	v := randVec(r, 1001, 1)
	d.Upload(x, v)
	compare(t, "round trip", get(d, x), v, TolExact)
	part := randVec(r, 37, 1)
	d.Upload(x.Slice(13, 37), part)
	want := append([]float32(nil), v...)
	copy(want[13:], part)
	compare(t, "upload into a view", get(d, x), want, TolExact)
	compare(t, "download of a view", get(d, x.Slice(13, 37)), part, TolExact)

	// Int uploads into a view, read back through a kernel that uses them.
	ints := d.AllocI32(5)
	d.UploadI32(ints.Slice(1, 3), []int32{2, 0, 1})
	src := put(d, []float32{10, 11, 20, 21, 30, 31})
	dst := d.Alloc(6)
	d.GatherRows(dst, src, ints.Slice(1, 3), 2)
	compare(t, "int upload (via GatherRows)", get(d, dst), []float32{30, 31, 10, 11, 20, 21}, TolExact)
}

// Elementwise: Fill, Copy, Add, AddTo, Scale on views at odd offsets.
func (s Suite) Elementwise(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	const n = 5003
	a, b := randVec(r, n+3, 1), randVec(r, n+3, 1)
	pa, pb := s.pair(a), s.pair(b)
	va := func(p pair) pair { return pair{p.d.Slice(3, n), p.r.Slice(3, n)} }
	out := s.zeros(n + 3)
	vo := va(out)

	s.Dev.Add(vo.d, va(pa).d, va(pb).d)
	s.Ref.Add(vo.r, va(pa).r, va(pb).r)
	s.compareBufs(t, "Add", out, TolExact)
	s.Dev.AddTo(vo.d, va(pa).d)
	s.Ref.AddTo(vo.r, va(pa).r)
	s.compareBufs(t, "AddTo", out, TolExact)
	s.Dev.Scale(vo.d, -0.37)
	s.Ref.Scale(vo.r, -0.37)
	s.compareBufs(t, "Scale", out, TolExact)
	s.Dev.Copy(vo.d.Slice(1, n-1), va(pb).d.Slice(0, n-1))
	s.Ref.Copy(vo.r.Slice(1, n-1), va(pb).r.Slice(0, n-1))
	s.compareBufs(t, "Copy", out, TolExact)
	s.Dev.Fill(vo.d.Slice(7, 300), 2.5)
	s.Ref.Fill(vo.r.Slice(7, 300), 2.5)
	s.compareBufs(t, "Fill", out, TolExact)
}

func (s Suite) GELU(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	const n = 7001
	x := randVec(r, n, 3)
	x[0], x[1], x[2] = 0, 40, -40 // saturated tails
	px, pd := s.pair(x), s.pair(randVec(r, n, 1))
	out, dx := s.zeros(n), s.zeros(n)
	s.Dev.GELU(out.d, px.d)
	s.Ref.GELU(out.r, px.r)
	s.compareBufs(t, "GELU", out, TolElem)
	s.Dev.GELUBackward(dx.d, px.d, pd.d)
	s.Ref.GELUBackward(dx.r, px.r, pd.r)
	s.compareBufs(t, "GELUBackward", dx, TolElem)
}

func (s Suite) Rows(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	const n, c = 29, 45
	src := s.pair(randVec(r, n*c, 1))
	rows := []int32{0, 3, 4, 17, 28, 11, 5}
	pr := s.ipair(rows)
	g := s.zeros(len(rows) * c)
	s.Dev.GatherRows(g.d, src.d, pr.d, c)
	s.Ref.GatherRows(g.r, src.r, pr.r, c)
	s.compareBufs(t, "GatherRows", g, TolExact)
	dst := s.pair(randVec(r, n*c, 1))
	s.Dev.ScatterRows(dst.d, g.d, pr.d, c)
	s.Ref.ScatterRows(dst.r, g.r, pr.r, c)
	s.compareBufs(t, "ScatterRows", dst, TolExact)
}

func (s Suite) Encoder(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	const v, maxT, c = 11, 40, 37
	// Packed sequences of lengths 1, 7 and 33: positions restart, tokens repeat.
	var tok, pos []int32
	for _, l := range []int{1, 7, 33} {
		for p := range l {
			tok = append(tok, int32(r.IntN(v)))
			pos = append(pos, int32(p))
		}
	}
	n := len(tok)
	wte, wpe := s.pair(randVec(r, v*c, 1)), s.pair(randVec(r, maxT*c, 1))
	pt, pp := s.ipair(tok), s.ipair(pos)
	out := s.zeros(n * c)
	s.Dev.Encoder(out.d, pt.d, pp.d, wte.d, wpe.d, n, c)
	s.Ref.Encoder(out.r, pt.r, pp.r, wte.r, wpe.r, n, c)
	s.compareBufs(t, "Encoder", out, TolExact)
	dout := s.pair(randVec(r, n*c, 1))
	dwte, dwpe := s.pair(randVec(r, v*c, 1)), s.pair(randVec(r, maxT*c, 1)) // accumulate into non-zero
	s.Dev.EncoderBackward(dwte.d, dwpe.d, dout.d, pt.d, pp.d, n, c)
	s.Ref.EncoderBackward(dwte.r, dwpe.r, dout.r, pt.r, pp.r, n, c)
	s.compareBufs(t, "EncoderBackward dwte", dwte, TolExact) // same order of additions
	s.compareBufs(t, "EncoderBackward dwpe", dwpe, TolExact)
}

func (s Suite) LayerNorm(t *testing.T) {
	for _, sz := range []struct{ n, c int }{{41, 37}, {53, 70}, {3, 5}} {
		t.Run(name("%dx%d", sz.n, sz.c), func(t *testing.T) { s.layerNorm(t, sz.n, sz.c) })
	}
}

func (s Suite) layerNorm(t *testing.T, n, c int) {
	r := rand.New(rand.NewPCG(6, uint64(n*c)))
	inp := randVec(r, n*c, 1.5)
	for i := range inp {
		inp[i] += 0.7
	}
	pi, pw, pb := s.pair(inp), s.pair(randVec(r, c, 1)), s.pair(randVec(r, c, 1))
	out, mean, rstd := s.zeros(n*c), s.zeros(n), s.zeros(n)
	s.Dev.LayerNorm(out.d, mean.d, rstd.d, pi.d, pw.d, pb.d, n, c, 1e-5)
	s.Ref.LayerNorm(out.r, mean.r, rstd.r, pi.r, pw.r, pb.r, n, c, 1e-5)
	s.compareBufs(t, "out", out, TolReduce)
	s.compareBufs(t, "mean", mean, TolReduce)
	s.compareBufs(t, "rstd", rstd, TolReduce)
	// The backward accumulates into all three gradients: start them non-zero.
	dout := s.pair(randVec(r, n*c, 1))
	dinp, dw, db := s.pair(randVec(r, n*c, 1)), s.pair(randVec(r, c, 1)), s.pair(randVec(r, c, 1))
	s.Dev.LayerNormBackward(dinp.d, dw.d, db.d, dout.d, pi.d, pw.d, mean.d, rstd.d, n, c)
	s.Ref.LayerNormBackward(dinp.r, dw.r, db.r, dout.r, pi.r, pw.r, mean.r, rstd.r, n, c)
	s.compareBufs(t, "dinp", dinp, TolReduce)
	s.compareBufs(t, "dw", dw, TolReduce)
	s.compareBufs(t, "db", db, TolReduce)
}

func (s Suite) MatMul(t *testing.T) {
	for _, sz := range []struct {
		n, c, oc int
		bias     bool
	}{{7, 9, 11, true}, {37, 67, 131, true}, {130, 36, 67, false}, {1, 5, 3, true}} {
		t.Run(name("%dx%dx%d", sz.n, sz.c, sz.oc), func(t *testing.T) { s.matMul(t, sz.n, sz.c, sz.oc, sz.bias) })
	}
}

func (s Suite) matMul(t *testing.T, n, c, oc int, bias bool) {
	r := rand.New(rand.NewPCG(7, uint64(n*c*oc)))
	pi, pw := s.pair(randVec(r, n*c, 1)), s.pair(randVec(r, oc*c, 1))
	var pb, dbias pair
	if bias {
		pb, dbias = s.pair(randVec(r, oc, 1)), s.pair(randVec(r, oc, 1))
	}
	out := s.pair(randVec(r, n*oc, 1)) // overwritten
	s.Dev.MatMul(out.d, pi.d, pw.d, pb.d, n, c, oc)
	s.Ref.MatMul(out.r, pi.r, pw.r, pb.r, n, c, oc)
	s.compareScaledBufs(t, "out", out)
	// The fused forms: a residual added after the bias, GELU of the product.
	res, sum := s.pair(randVec(r, n*oc, 1)), s.pair(randVec(r, n*oc, 1))
	s.Dev.MatMulAdd(sum.d, res.d, pi.d, pw.d, pb.d, n, c, oc)
	s.Ref.MatMulAdd(sum.r, res.r, pi.r, pw.r, pb.r, n, c, oc)
	s.compareScaledBufs(t, "MatMulAdd", sum)
	pre, act := s.pair(randVec(r, n*oc, 1)), s.pair(randVec(r, n*oc, 1))
	s.Dev.MatMulGELU(pre.d, act.d, pi.d, pw.d, pb.d, n, c, oc)
	s.Ref.MatMulGELU(pre.r, act.r, pi.r, pw.r, pb.r, n, c, oc)
	s.compareScaledBufs(t, "MatMulGELU pre", pre)
	s.compareScaledBufs(t, "MatMulGELU out", act)
	// On each backend the fused GELU gives the bits of the product followed by its own GELU.
	for _, b := range []struct {
		name     string
		be       backend.Backend
		pre, act backend.Buf
		in       [3]backend.Buf
	}{{"device", s.Dev, pre.d, act.d, [3]backend.Buf{pi.d, pw.d, pb.d}}, {"reference", s.Ref, pre.r, act.r, [3]backend.Buf{pi.r, pw.r, pb.r}}} {
		sep, sepAct := b.be.Alloc(n*oc), b.be.Alloc(n*oc)
		b.be.MatMul(sep, b.in[0], b.in[1], b.in[2], n, c, oc)
		b.be.GELU(sepAct, sep)
		bitsEqual(t, "MatMulGELU pre against MatMul, "+b.name, get(b.be, b.pre), get(b.be, sep))
		bitsEqual(t, "MatMulGELU out against MatMul then GELU, "+b.name, get(b.be, b.act), get(b.be, sepAct))
	}
	dout := s.pair(randVec(r, n*oc, 1))
	dinp, dw := s.pair(randVec(r, n*c, 1)), s.pair(randVec(r, oc*c, 1))
	s.Dev.MatMulBackward(dinp.d, dw.d, dbias.d, dout.d, pi.d, pw.d, n, c, oc)
	s.Ref.MatMulBackward(dinp.r, dw.r, dbias.r, dout.r, pi.r, pw.r, n, c, oc)
	s.compareScaledBufs(t, "dinp", dinp)
	s.compareScaledBufs(t, "dw", dw)
	if bias {
		s.compareScaledBufs(t, "dbias", dbias)
	}
	// Without an input gradient only dw (and dbias) accumulate.
	s.Dev.MatMulBackward(backend.Buf{}, dw.d, backend.Buf{}, dout.d, pi.d, pw.d, n, c, oc)
	s.Ref.MatMulBackward(backend.Buf{}, dw.r, backend.Buf{}, dout.r, pi.r, pw.r, n, c, oc)
	s.compareScaledBufs(t, "dw (no dinp)", dw)
}

// Attention over sequences of lengths 1, 7, 33 and 130 packed together; the head size 36 is
// more than a warp, so the per-channel loops wrap. Then a pack with shared prefixes: a
// sequence of its own, a prompt of 40 rows with three continuations (one longer than a warp),
// and a prompt of 1 row with one.
func (s Suite) Attention(t *testing.T) {
	s.attention(t, backend.Pack{Start: []int32{0, 1, 8, 41}, Len: []int32{1, 7, 33, 130}})
	t.Run("prefixes", func(t *testing.T) {
		s.attention(t, backend.Pack{Start: []int32{0, 5, 45, 50, 51, 90, 91}, Len: []int32{5, 40, 5, 1, 39, 1, 3},
			Prefix: []int32{-1, -1, 1, 1, 1, -1, 5}})
	})
}

func (s Suite) attention(t *testing.T, p backend.Pack) {
	r := rand.New(rand.NewPCG(8, 8))
	const nh, c = 2, 72
	n := p.Rows()
	qkv := s.pair(randVec(r, n*3*c, 1))
	out, lse := s.zeros(n*c), s.zeros(n*nh)
	s.Dev.Attention(out.d, lse.d, qkv.d, p, nh, c)
	s.Ref.Attention(out.r, lse.r, qkv.r, p, nh, c)
	s.compareBufs(t, "out", out, TolReduce)
	s.compareBufs(t, "lse", lse, TolReduce)
	dout := s.pair(randVec(r, n*c, 1))
	dqkv := s.pair(randVec(r, n*3*c, 1)) // overwritten
	s.Dev.AttentionBackward(dqkv.d, dout.d, out.d, lse.d, qkv.d, p, nh, c)
	s.Ref.AttentionBackward(dqkv.r, dout.r, out.r, lse.r, qkv.r, p, nh, c)
	s.compareBufs(t, "dqkv", dqkv, TolReduce)
}

// AttentionDecode: sequences fed one position at a time into cache slots (not in slot order),
// each step's keys and values stored by AttentionDecode itself, match the packed attention over
// the whole sequences, and the caches match exactly; then rows of a slot that reads its first
// positions from another (KV.Shared).
func (s Suite) AttentionDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	const nh, c, capacity, slots = 2, 70, 40, 3
	p := backend.Pack{Start: []int32{0, 5}, Len: []int32{5, 37}}
	slotOf := []int32{2, 0}
	n := p.Rows()
	qkv := randVec(r, n*3*c, 1)
	kv := backend.KV{K: s.Dev.Alloc(slots * capacity * c), V: s.Dev.Alloc(slots * capacity * c), Cap: capacity}
	kvr := backend.KV{K: s.Ref.Alloc(slots * capacity * c), V: s.Ref.Alloc(slots * capacity * c), Cap: capacity}
	for step := range 37 {
		var rows []int
		var slot, pos []int32
		for i := range p.Start {
			if step < int(p.Len[i]) {
				rows = append(rows, int(p.Start[i])+step)
				slot, pos = append(slot, slotOf[i]), append(pos, int32(step))
			}
		}
		q := make([]float32, 0, len(rows)*3*c)
		for _, row := range rows {
			q = append(q, qkv[row*3*c:(row+1)*3*c]...)
		}
		pq, ps, pp := s.pair(q), s.ipair(slot), s.ipair(pos)
		out := s.zeros(len(rows) * c)
		s.Dev.AttentionDecode(out.d, pq.d, kv, ps.d, pp.d, len(rows), nh, c)
		s.Ref.AttentionDecode(out.r, pq.r, kvr, ps.r, pp.r, len(rows), nh, c)
		s.compareBufs(t, name("decode step %d", step), out, TolReduce)
	}
	compare(t, "K cache", get(s.Dev, kv.K), get(s.Ref, kvr.K), TolExact)
	compare(t, "V cache", get(s.Dev, kv.V), get(s.Ref, kvr.V), TolExact)

	// Slot 1 reads its first 20 positions from slot 2 (a shared prompt) and the rest from its
	// own; slot 0 shares nothing. Every row attends over the same cache as above.
	shared := s.ipair([]int32{0, 0, 2, 20, 2, 0})
	kv.Shared, kvr.Shared = shared.d, shared.r
	slot, pos := []int32{1, 0, 1}, []int32{24, 30, 19}
	q := randVec(r, len(slot)*3*c, 1)
	pq, ps, pp := s.pair(q), s.ipair(slot), s.ipair(pos)
	out := s.zeros(len(slot) * c)
	s.Dev.AttentionDecode(out.d, pq.d, kv, ps.d, pp.d, len(slot), nh, c)
	s.Ref.AttentionDecode(out.r, pq.r, kvr, ps.r, pp.r, len(slot), nh, c)
	s.compareBufs(t, "decode over a shared prefix", out, TolReduce)
}

func (s Suite) LogProbs(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 10))
	const rows, v = 6, 1031
	const invTemp = 1.25
	logits := randVec(r, rows*v, 2)
	logits[3*v+17] = 30 // a peaked row: p ≈ 1 at the target
	targets := []int32{0, 1030, 17, 17, 512, 1}
	pl, pt := s.pair(logits), s.ipair(targets)
	for _, withEnt := range []bool{true, false} {
		lse, logp, ent := s.zeros(rows), s.zeros(rows), s.zeros(rows)
		de, dr := ent.d, ent.r
		if !withEnt {
			de, dr = backend.Buf{}, backend.Buf{}
		}
		s.Dev.LogProbs(lse.d, logp.d, de, pl.d, pt.d, rows, v, invTemp)
		s.Ref.LogProbs(lse.r, logp.r, dr, pl.r, pt.r, rows, v, invTemp)
		s.compareBufs(t, "lse", lse, TolReduce)
		s.compareBufs(t, "logp", logp, TolReduce)
		if withEnt {
			s.compareBufs(t, "entropy", ent, TolReduce)
		}
		dlogp, dent := s.pair(randVec(r, rows, 1)), s.pair(randVec(r, rows, 0.3))
		grad := s.pair(logits)
		if withEnt {
			s.Dev.LogProbsBackward(grad.d, lse.d, ent.d, dlogp.d, dent.d, pt.d, rows, v, invTemp)
			s.Ref.LogProbsBackward(grad.r, lse.r, ent.r, dlogp.r, dent.r, pt.r, rows, v, invTemp)
		} else {
			s.Dev.LogProbsBackward(grad.d, lse.d, backend.Buf{}, dlogp.d, backend.Buf{}, pt.d, rows, v, invTemp)
			s.Ref.LogProbsBackward(grad.r, lse.r, backend.Buf{}, dlogp.r, backend.Buf{}, pt.r, rows, v, invTemp)
		}
		compareScaled(t, name("dlogits (entropy %v)", withEnt), get(s.Dev, grad.d), get(s.Ref, grad.r), TolReduce.Rel)
	}
}

func (s Suite) Softmax(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	const rows, v = 5, 1037
	pl := s.pair(randVec(r, rows*v, 3))
	probs, lse := s.zeros(rows*v), s.zeros(rows)
	s.Dev.Softmax(probs.d, lse.d, pl.d, rows, v, 0.8)
	s.Ref.Softmax(probs.r, lse.r, pl.r, rows, v, 0.8)
	s.compareBufs(t, "probs", probs, TolReduce)
	s.compareBufs(t, "lse", lse, TolReduce)
}

func (s Suite) AdamW(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 12))
	const n = 40003
	v := randVec(r, n, 0.1)
	for i := range v {
		v[i] *= v[i]
	}
	p, g, m, vv := s.pair(randVec(r, n, 1)), s.pair(randVec(r, n, 1)), s.pair(randVec(r, n, 0.1)), s.pair(v)
	h := backend.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 3}
	for _, noDecay := range [][]backend.Span{nil, {{Off: 0, N: 7}, {Off: 3000, N: 0}, {Off: 3000, N: 768}, {Off: 40000, N: 3}}} {
		h.NoDecay = noDecay
		s.Dev.AdamW(p.d, g.d, m.d, vv.d, h)
		s.Ref.AdamW(p.r, g.r, m.r, vv.r, h)
		s.compareBufs(t, name("p (spans without decay %v)", noDecay), p, TolElem)
		s.compareBufs(t, "m", m, TolElem)
		s.compareBufs(t, "v", vv, TolElem)
	}
}

func (s Suite) SumSquares(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	x := randVec(r, 300007, 1) // five chunks, the last one partial
	d := put(s.Dev, x)
	got, want := s.Dev.SumSquares(d), s.Ref.SumSquares(put(s.Ref, x))
	if math.Abs(got-want) > 1e-12*want {
		t.Fatalf("SumSquares = %.17g, want %.17g", got, want)
	}
	if g := s.Dev.SumSquares(d.Slice(5, 17)); math.Abs(g-s.Ref.SumSquares(put(s.Ref, x[5:22]))) > 1e-12*g {
		t.Fatalf("SumSquares of a view = %g", g)
	}
	x[123457] = float32(math.Inf(1))
	s.Dev.Upload(d, x)
	if g := s.Dev.SumSquares(d); !math.IsInf(g, 1) {
		t.Fatalf("SumSquares with an Inf element = %g", g)
	}
	x[7] = float32(math.NaN())
	s.Dev.Upload(d, x)
	if g := s.Dev.SumSquares(d); !math.IsNaN(g) {
		t.Fatalf("SumSquares with a NaN element = %g", g)
	}
}

// SumSquaresMany: the sums of squares of many spans of a view in one call (tensors of
// several chunks, of one, empty, overlapping): each the bits of SumSquares over its span on
// the same device, the CPU's within SumSquares' tolerance, the same bits when run again, and
// a NaN or an Inf reaches its own span's sum only.
func (s Suite) SumSquaresMany(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 15))
	x := randVec(r, 400009, 1)
	spans := []backend.Span{{Off: 0, N: 150001}, {Off: 150001, N: 0}, {Off: 150001, N: 768}, {Off: 150769, N: 3},
		{Off: 150772, N: 249230}, {Off: 5, N: 17}}
	d, ref := put(s.Dev, x), put(s.Ref, x)
	dv, rv := d.Slice(7, len(x)-7), ref.Slice(7, len(x)-7)
	check := func(what string) {
		got, again, want := make([]float64, len(spans)), make([]float64, len(spans)), make([]float64, len(spans))
		s.Dev.SumSquaresMany(dv, spans, got)
		s.Dev.SumSquaresMany(dv, spans, again)
		s.Ref.SumSquaresMany(rv, spans, want)
		for i, sp := range spans {
			alone := s.Dev.SumSquares(dv.Slice(sp.Off, sp.N))
			if math.Float64bits(got[i]) != math.Float64bits(alone) || math.Float64bits(again[i]) != math.Float64bits(got[i]) {
				t.Fatalf("%s: span %d: %v, then %v; SumSquares of the span alone %v", what, i, got[i], again[i], alone)
			}
			if !(math.Abs(got[i]-want[i]) <= 1e-12*want[i]) && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) && got[i] != want[i] {
				t.Fatalf("%s: span %d = %.17g, CPU %.17g", what, i, got[i], want[i])
			}
		}
	}
	check("finite")
	x[7+150001+100] = float32(math.NaN()) // span 2
	x[7+200000] = float32(math.Inf(-1))   // span 4
	s.Dev.Upload(d, x)
	s.Ref.Upload(ref, x)
	check("with a NaN and an Inf")
	got := make([]float64, len(spans))
	s.Dev.SumSquaresMany(dv, spans, got)
	for i, g := range got {
		if bad := math.IsNaN(g) || math.IsInf(g, 0); bad != (i == 2 || i == 4) {
			t.Fatalf("span %d = %v: only spans 2 (NaN) and 4 (Inf) hold a non-finite element", i, g)
		}
	}
	if !math.IsNaN(got[2]) || !math.IsInf(got[4], 1) {
		t.Fatalf("span 2 = %v, want NaN; span 4 = %v, want +Inf", got[2], got[4])
	}
}

// Determinism: the reductions give the same bits when run again.
func (s Suite) Determinism(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 14))
	d := s.Dev
	const n, c, nh = 40, 24, 2
	p := backend.Pack{Start: []int32{0, 17}, Len: []int32{17, 23}}
	inp, w, dout := put(d, randVec(r, n*c, 1)), put(d, randVec(r, c, 1)), put(d, randVec(r, n*c, 1))
	qkv, datt := put(d, randVec(r, n*3*c, 1)), put(d, randVec(r, n*c, 1))
	x := put(d, randVec(r, 200003, 1))
	run := func() ([]float32, float64) {
		out, mean, rstd := d.Alloc(n*c), d.Alloc(n), d.Alloc(n)
		d.LayerNorm(out, mean, rstd, inp, w, w, n, c, 1e-5)
		dinp, dw, db := d.Alloc(n*c), d.Alloc(c), d.Alloc(c)
		d.LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd, n, c)
		dbias, dwm := d.Alloc(c), d.Alloc(c*c)
		d.MatMulBackward(backend.Buf{}, dwm, dbias, dout, inp, put(d, make([]float32, c*c)), n, c, c)
		ao, lse, dq := d.Alloc(n*c), d.Alloc(n*nh), d.Alloc(n*3*c)
		d.Attention(ao, lse, qkv, p, nh, c)
		d.AttentionBackward(dq, datt, ao, lse, qkv, p, nh, c)
		var all []float32
		for _, b := range []backend.Buf{out, dinp, dw, db, dbias, ao, lse, dq} {
			all = append(all, get(d, b)...)
		}
		return all, d.SumSquares(x)
	}
	a, sa := run()
	b, sb := run()
	bitsEqual(t, "LayerNorm, bias gradient, attention, run to run", a, b)
	if sa != sb {
		t.Fatalf("SumSquares: %v then %v", sa, sb)
	}
}
