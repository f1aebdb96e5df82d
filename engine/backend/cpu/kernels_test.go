package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
)

// Kernel tests: each forward against a direct float64 formula, each backward against
// central finite differences of its forward, on small shapes that are not multiples of any
// grain or block size.

func randVec(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

func buf(c *CPU, v []float32) backend.Buf {
	b := c.Alloc(len(v))
	c.Upload(b, v)
	return b
}

func ibuf(c *CPU, v []int32) backend.I32 {
	b := c.AllocI32(len(v))
	c.UploadI32(b, v)
	return b
}

func dot64(w, x []float32) float64 {
	s := 0.0
	for i := range w {
		s += float64(w[i]) * float64(x[i])
	}
	return s
}

// checkFD compares analytic gradients of loss w.r.t. x with central differences at up to
// 40 indices. The error is measured against the largest analytic gradient, because float32
// forward rounding (≈1e-7 relative) divided by h bounds what differences can resolve.
func checkFD(t *testing.T, name string, x, analytic []float32, loss func() float64, h float32, tol float64) {
	t.Helper()
	scale := 1e-12
	for _, g := range analytic {
		scale = max(scale, math.Abs(float64(g)))
	}
	step := max(1, len(x)/40)
	worst := 0.0
	for i := 0; i < len(x); i += step {
		orig := x[i]
		x[i] = orig + h
		xp := x[i]
		lp := loss()
		x[i] = orig - h
		xm := x[i]
		lm := loss()
		x[i] = orig
		num := (lp - lm) / float64(xp-xm)
		if e := math.Abs(num-float64(analytic[i])) / scale; e > worst {
			worst = e
			if e > tol {
				t.Errorf("%s[%d]: analytic %.6g, finite difference %.6g (error %.2g of max |grad| %.3g)", name, i, analytic[i], num, e, scale)
			}
		}
	}
	t.Logf("%s: worst FD error %.2g of max |grad| %.3g", name, worst, scale)
}

func maxAbsDiff(a []float32, b []float64) float64 {
	m := 0.0
	for i := range a {
		m = max(m, math.Abs(float64(a[i])-b[i]))
	}
	return m
}

func TestEncoder(t *testing.T) {
	c, r := New(2), rand.New(rand.NewPCG(1, 2))
	const v, maxT, ch, n = 11, 9, 37, 13
	wte, wpe := randVec(r, v*ch, 1), randVec(r, maxT*ch, 1)
	tok := []int32{3, 3, 0, 10, 5, 3, 7, 7, 1, 2, 3, 9, 0}
	pos := []int32{0, 1, 2, 3, 0, 1, 0, 1, 2, 3, 4, 5, 6}
	out := c.Alloc(n * ch)
	c.Encoder(out, ibuf(c, tok), ibuf(c, pos), buf(c, wte), buf(c, wpe), n, ch)
	for i := range n {
		for k := range ch {
			if want := wte[int(tok[i])*ch+k] + wpe[int(pos[i])*ch+k]; out.F32()[i*ch+k] != want {
				t.Fatalf("out[%d,%d] = %g, want %g", i, k, out.F32()[i*ch+k], want)
			}
		}
	}
	dout := randVec(r, n*ch, 1)
	dwte, dwpe := c.Alloc(v*ch), c.Alloc(maxT*ch)
	c.EncoderBackward(dwte, dwpe, buf(c, dout), ibuf(c, tok), ibuf(c, pos), n, ch)
	wte64 := make([]float64, v*ch)
	for i := range n {
		for k := range ch {
			wte64[int(tok[i])*ch+k] += float64(dout[i*ch+k])
		}
	}
	if d := maxAbsDiff(dwte.F32(), wte64); d > 1e-5 {
		t.Fatalf("dwte differs from the direct sum by %g", d)
	}
}

func TestLayerNorm(t *testing.T) {
	c, r := New(2), rand.New(rand.NewPCG(3, 4))
	const n, ch = 37, 13 // n spans three backward chunks
	inp, w, b := randVec(r, n*ch, 1.5), randVec(r, ch, 1), randVec(r, ch, 1)
	for i := range inp {
		inp[i] += 0.7 // a non-zero mean
	}
	dout := randVec(r, n*ch, 1)
	out, mean, rstd := c.Alloc(n*ch), c.Alloc(n), c.Alloc(n)
	bi, bw, bb := buf(c, inp), buf(c, w), buf(c, b)
	forward := func() float64 {
		c.LayerNorm(out, mean, rstd, bi, bw, bb, n, ch, 1e-5)
		return dot64(dout, out.F32())
	}
	forward()
	want := make([]float64, n*ch)
	for i := range n {
		x := inp[i*ch : (i+1)*ch]
		m, v := 0.0, 0.0
		for _, xv := range x {
			m += float64(xv)
		}
		m /= ch
		for _, xv := range x {
			v += (float64(xv) - m) * (float64(xv) - m)
		}
		s := 1 / math.Sqrt(v/ch+1e-5)
		for k, xv := range x {
			want[i*ch+k] = (float64(xv)-m)*s*float64(w[k]) + float64(b[k])
		}
	}
	if d := maxAbsDiff(out.F32(), want); d > 2e-6 {
		t.Fatalf("LayerNorm forward differs by %g", d)
	}
	dinp, dw, db := c.Alloc(n*ch), c.Alloc(ch), c.Alloc(ch)
	c.LayerNormBackward(dinp, dw, db, buf(c, dout), bi, bw, mean, rstd, n, ch)
	checkFD(t, "dinp", bi.F32(), dinp.F32(), forward, 1e-2, 2e-3)
	checkFD(t, "dw", bw.F32(), dw.F32(), forward, 1e-2, 2e-3)
	checkFD(t, "db", bb.F32(), db.F32(), forward, 1e-2, 2e-3)
}

// TestLayerNormRowsAlike: a row normalised among others (eight at a time, their sums side by
// side in vector lanes) comes out bit for bit as the same row normalised alone.
func TestLayerNormRowsAlike(t *testing.T) {
	c, r := New(2), rand.New(rand.NewPCG(5, 6))
	const n, ch = 37, 768
	inp, w, b := randVec(r, n*ch, 1.5), randVec(r, ch, 1), randVec(r, ch, 1)
	for i := range inp {
		inp[i] += float32(i%ch) / ch // a different mean and spread in every row
	}
	bw, bb := buf(c, w), buf(c, b)
	out, mean, rstd := c.Alloc(n*ch), c.Alloc(n), c.Alloc(n)
	c.LayerNorm(out, mean, rstd, buf(c, inp), bw, bb, n, ch, 1e-5)
	one, m1, r1 := c.Alloc(ch), c.Alloc(1), c.Alloc(1)
	for i := range n {
		c.LayerNorm(one, m1, r1, buf(c, inp[i*ch:(i+1)*ch]), bw, bb, 1, ch, 1e-5)
		got := out.F32()[i*ch : (i+1)*ch]
		for k, v := range one.F32() {
			if math.Float32bits(v) != math.Float32bits(got[k]) {
				t.Fatalf("row %d element %d: %g among the rows, %g alone", i, k, got[k], v)
			}
		}
		if mean.F32()[i] != m1.F32()[0] || rstd.F32()[i] != r1.F32()[0] {
			t.Fatalf("row %d: mean, rstd %g %g among the rows, %g %g alone", i, mean.F32()[i], rstd.F32()[i], m1.F32()[0], r1.F32()[0])
		}
	}
}

func TestMatMul(t *testing.T) {
	// The second shape is large enough for the GEMMs to be split across workers.
	for _, s := range []struct{ n, ch, oc int }{{7, 9, 11}, {37, 67, 131}, {131, 67, 37}} {
		t.Run(fmt.Sprintf("%dx%dx%d", s.n, s.ch, s.oc), func(t *testing.T) { testMatMul(t, s.n, s.ch, s.oc) })
	}
}

func testMatMul(t *testing.T, n, ch, oc int) {
	c, r := New(2), rand.New(rand.NewPCG(5, 6))
	inp, w, b, dout := randVec(r, n*ch, 1), randVec(r, oc*ch, 1), randVec(r, oc, 1), randVec(r, n*oc, 1)
	bi, bw, bb := buf(c, inp), buf(c, w), buf(c, b)
	out := c.Alloc(n * oc)
	forward := func() float64 {
		c.MatMul(out, bi, bw, bb, n, ch, oc)
		return dot64(dout, out.F32())
	}
	forward()
	want := make([]float64, n*oc)
	for i := range n {
		for o := range oc {
			want[i*oc+o] = dot64(inp[i*ch:(i+1)*ch], w[o*ch:(o+1)*ch]) + float64(b[o])
		}
	}
	if d := maxAbsDiff(out.F32(), want); d > 1e-5 {
		t.Fatalf("MatMul forward differs by %g", d)
	}
	dinp, dw, db := c.Alloc(n*ch), c.Alloc(oc*ch), c.Alloc(oc)
	c.MatMulBackward(dinp, dw, db, buf(c, dout), bi, bw, n, ch, oc)
	checkFD(t, "dinp", bi.F32(), dinp.F32(), forward, 1e-2, 1e-3)
	checkFD(t, "dw", bw.F32(), dw.F32(), forward, 1e-2, 1e-3)
	checkFD(t, "db", bb.F32(), db.F32(), forward, 1e-2, 1e-3)
	// Parameter gradients accumulate; the input gradient is overwritten.
	c.MatMulBackward(dinp, dw, db, buf(c, dout), bi, bw, n, ch, oc)
	if g := db.F32()[0]; math.Abs(float64(g)-2*float64(sumCol(dout, oc, 0))) > 1e-4 {
		t.Fatalf("dbias did not accumulate: %g", g)
	}
}

func sumCol(x []float32, cols, col int) float32 {
	var s float32
	for i := col; i < len(x); i += cols {
		s += x[i]
	}
	return s
}

// naiveAttention is causal multi-head attention over one packed batch in float64; a
// continuation's rows see its prefix's rows first.
func naiveAttention(qkv []float32, p backend.Pack, nh, c int) []float64 {
	hd := c / nh
	out := make([]float64, p.Rows()*c)
	for i := range p.Start {
		s, t := int(p.Start[i]), int(p.Len[i])
		var keys []int // rows this sequence's rows see before their own
		if pre := p.PrefixOf(i); pre >= 0 {
			for r := range int(p.Len[pre]) {
				keys = append(keys, int(p.Start[pre])+r)
			}
		}
		for h := range nh {
			for q := range t {
				ks := keys
				for k := 0; k <= q; k++ {
					ks = append(ks[:len(ks):len(ks)], s+k)
				}
				sc := make([]float64, len(ks))
				m := math.Inf(-1)
				for x, k := range ks {
					for e := range hd {
						sc[x] += float64(qkv[(s+q)*3*c+h*hd+e]) * float64(qkv[k*3*c+c+h*hd+e])
					}
					sc[x] /= math.Sqrt(float64(hd))
					m = max(m, sc[x])
				}
				z := 0.0
				for x := range sc {
					sc[x] = math.Exp(sc[x] - m)
					z += sc[x]
				}
				for x, k := range ks {
					for e := range hd {
						out[(s+q)*c+h*hd+e] += sc[x] / z * float64(qkv[k*3*c+2*c+h*hd+e])
					}
				}
			}
		}
	}
	return out
}

// TestAttention: forward against the direct formula and backward against finite differences,
// for sequences of their own and for continuations of a shared prefix (a GRPO group: a prompt
// and its completions), mixed in one pack.
func TestAttention(t *testing.T) {
	for _, c := range []struct {
		name string
		p    backend.Pack
	}{
		{"sequences", backend.Pack{Start: []int32{0, 3, 4}, Len: []int32{3, 1, 6}}},
		{"prefixes", backend.Pack{Start: []int32{0, 3, 4, 9, 11, 12, 15}, Len: []int32{3, 1, 5, 2, 1, 3, 4},
			Prefix: []int32{-1, -1, 1, 1, 1, -1, 5}}},
	} {
		t.Run(c.name, func(t *testing.T) { testAttention(t, c.p) })
	}
}

func testAttention(t *testing.T, p backend.Pack) {
	c, r := New(2), rand.New(rand.NewPCG(7, 8))
	const nh, ch = 2, 10
	n := p.Rows()
	qkv := randVec(r, n*3*ch, 1)
	dout := randVec(r, n*ch, 1)
	bq := buf(c, qkv)
	out, lse := c.Alloc(n*ch), c.Alloc(n*nh)
	forward := func() float64 {
		c.Attention(out, lse, bq, p, nh, ch)
		return dot64(dout, out.F32())
	}
	forward()
	if d := maxAbsDiff(out.F32(), naiveAttention(qkv, p, nh, ch)); d > 1e-6 {
		t.Fatalf("Attention forward differs from the direct formula by %g", d)
	}
	dqkv := c.Alloc(n * 3 * ch)
	c.AttentionBackward(dqkv, buf(c, dout), out, lse, bq, p, nh, ch)
	checkFD(t, "dqkv", bq.F32(), dqkv.F32(), forward, 1e-2, 2e-3)
}

// TestAttentionPrefixIsConcatenation: a continuation of a prefix gives, row for row, what the
// prefix followed by the continuation gives as one sequence: the same outputs bit for bit
// (DESIGN §6.1), and the gradients of its own rows; the prefix's gradients are those of all
// its copies summed.
func TestAttentionPrefixIsConcatenation(t *testing.T) {
	c, r := New(3), rand.New(rand.NewPCG(15, 16))
	const nh, ch, pl = 3, 12, 5
	conts := []int{4, 1, 6}
	shared := backend.Pack{Start: []int32{0}, Len: []int32{pl}, Prefix: []int32{-1}}
	var whole backend.Pack
	prefix := randVec(r, pl*3*ch, 1)
	var qs, qw, ds, dw []float32 // qkv and dout of the shared and the whole layout
	qs = append(qs, prefix...)
	ds = append(ds, make([]float32, pl*ch)...)
	for _, l := range conts {
		rows, dy := randVec(r, l*3*ch, 1), randVec(r, l*ch, 1)
		shared.Start, shared.Len, shared.Prefix = append(shared.Start, int32(len(qs)/(3*ch))), append(shared.Len, int32(l)), append(shared.Prefix, 0)
		qs, ds = append(qs, rows...), append(ds, dy...)
		whole.Start, whole.Len = append(whole.Start, int32(len(qw)/(3*ch))), append(whole.Len, int32(pl+l))
		qw, dw = append(append(qw, prefix...), rows...), append(append(dw, make([]float32, pl*ch)...), dy...)
	}
	run := func(p backend.Pack, qkv, dout []float32) (out, dqkv []float32) {
		n := p.Rows()
		o, lse, dq := c.Alloc(n*ch), c.Alloc(n*nh), c.Alloc(n*3*ch)
		c.Attention(o, lse, buf(c, qkv), p, nh, ch)
		c.AttentionBackward(dq, buf(c, dout), o, lse, buf(c, qkv), p, nh, ch)
		return o.F32(), dq.F32()
	}
	os, gs := run(shared, qs, ds)
	ow, gw := run(whole, qw, dw)
	near := func(what string, a, b []float32) {
		t.Helper()
		for i := range a {
			if d := math.Abs(float64(a[i] - b[i])); d > 1e-6 {
				t.Fatalf("%s element %d: shared %g, whole %g", what, i, a[i], b[i])
			}
		}
	}
	prefixGrad := make([]float32, pl*3*ch)
	for i, l := range conts {
		s, w := int(shared.Start[i+1]), int(whole.Start[i])
		if k := firstDiff(os[s*ch:(s+l)*ch], ow[(w+pl)*ch:(w+pl+l)*ch]); k >= 0 {
			t.Fatalf("continuation %d: output element %d differs from the whole sequence's", i, k)
		}
		near("own gradient", gs[s*3*ch:(s+l)*3*ch], gw[(w+pl)*3*ch:(w+pl+l)*3*ch])
		for k := range prefixGrad {
			prefixGrad[k] += gw[w*3*ch+k]
		}
	}
	near("prefix gradient", gs[:pl*3*ch], prefixGrad)
}

// TestAttentionDecodeMatchesPacked is DESIGN §6.1 for attention: a row decoded against the
// KV cache gives bit for bit what the packed forward gives it, and the packed forward gives
// each sequence what it gives it alone, on 1, 2 or 3 threads; with heads of 4 channels and of
// 64 (where the forward takes rows four at a time), in the sixteen-lane path and the AVX2 one.
func TestAttentionDecodeMatchesPacked(t *testing.T) {
	defer setDecode16(true)
	for _, on := range []bool{true, false} {
		setDecode16(on)
		for _, ch := range []int{12, 192} {
			t.Run(fmt.Sprintf("sixteen lanes %v, %d channels", on, ch), func(t *testing.T) { attentionDecodeMatchesPacked(t, ch) })
		}
	}
}

func attentionDecodeMatchesPacked(t *testing.T, ch int) {
	c, r := New(2), rand.New(rand.NewPCG(9, 10))
	const nh, capacity = 3, 8
	p := backend.Pack{Start: []int32{0, 5}, Len: []int32{5, 7}}
	n := p.Rows()
	qkv := randVec(r, n*3*ch, 1)
	out, lse := c.Alloc(n*ch), c.Alloc(n*nh)
	c.Attention(out, lse, buf(c, qkv), p, nh, ch)
	for _, threads := range []int{1, 3} {
		c := New(threads)
		for i := range p.Start {
			s, l := int(p.Start[i]), int(p.Len[i])
			alone := c.Alloc(l * ch)
			c.Attention(alone, c.Alloc(l*nh), buf(c, qkv[s*3*ch:(s+l)*3*ch]), backend.Pack{Start: []int32{0}, Len: []int32{int32(l)}}, nh, ch)
			if k := firstDiff(alone.F32(), out.F32()[s*ch:(s+l)*ch]); k >= 0 {
				t.Fatalf("%d threads: sequence %d alone differs from it packed at element %d", threads, i, k)
			}
		}
	}

	// Feed the same rows one position at a time through the cache, slots 1 and 0.
	kv := backend.KV{K: c.Alloc(2 * capacity * ch), V: c.Alloc(2 * capacity * ch), Cap: capacity}
	slotOf := []int32{1, 0}
	for step := 0; step < 7; step++ {
		var rows []int
		var slot, pos []int32
		for i := range p.Start {
			if step < int(p.Len[i]) {
				rows = append(rows, int(p.Start[i])+step)
				slot, pos = append(slot, slotOf[i]), append(pos, int32(step))
			}
		}
		q := make([]float32, 0, len(rows)*3*ch)
		for _, row := range rows {
			q = append(q, qkv[row*3*ch:(row+1)*3*ch]...)
		}
		bq, bs, bp := buf(c, q), ibuf(c, slot), ibuf(c, pos)
		c.KVWrite(kv, bq, bs, bp, len(rows), ch)
		dec := c.Alloc(len(rows) * ch)
		c.AttentionDecode(dec, bq, kv, bs, bp, len(rows), nh, ch)
		for k, row := range rows {
			if e := firstDiff(dec.F32()[k*ch:(k+1)*ch], out.F32()[row*ch:(row+1)*ch]); e >= 0 {
				t.Fatalf("step %d row %d: decode %g vs packed %g", step, row, dec.F32()[k*ch+e], out.F32()[row*ch+e])
			}
		}
	}
}

// TestAttentionDecodeSharedPrefix: two samples of one prompt, the prompt's keys and values
// cached once in slot 2 and shared by slot 0: decoding each sample's tokens gives the packed
// attention over prompt + sample, bit for bit.
func TestAttentionDecodeSharedPrefix(t *testing.T) {
	c, r := New(2), rand.New(rand.NewPCG(23, 24))
	const nh, ch, capacity, pl = 2, 16, 12, 5
	prompt := randVec(r, pl*3*ch, 1)
	samples := [][]float32{randVec(r, 4*3*ch, 1), randVec(r, 6*3*ch, 1)}
	slots := []int32{2, 0} // sample 0 continues in the prompt's own slot, sample 1 in slot 0
	kv := backend.KV{K: c.Alloc(3 * capacity * ch), V: c.Alloc(3 * capacity * ch), Cap: capacity, Shared: c.AllocI32(6)}
	kv.Shared.Ints()[0], kv.Shared.Ints()[1] = 2, pl // slot 0 reads positions < 5 from slot 2
	pos := make([]int32, pl)
	for i := range pos {
		pos[i] = int32(i)
	}
	two := make([]int32, pl)
	for i := range two {
		two[i] = 2
	}
	c.KVWrite(kv, buf(c, prompt), ibuf(c, two), ibuf(c, pos), pl, ch)
	for i, smp := range samples {
		rows := len(smp) / (3 * ch)
		full := append(append([]float32{}, prompt...), smp...)
		want := c.Alloc((pl + rows) * ch)
		c.Attention(want, c.Alloc((pl+rows)*nh), buf(c, full), backend.Pack{Start: []int32{0}, Len: []int32{int32(pl + rows)}}, nh, ch)
		for k := range rows {
			q := buf(c, smp[k*3*ch:(k+1)*3*ch])
			sl, ps := ibuf(c, []int32{slots[i]}), ibuf(c, []int32{int32(pl + k)})
			c.KVWrite(kv, q, sl, ps, 1, ch)
			got := c.Alloc(ch)
			c.AttentionDecode(got, q, kv, sl, ps, 1, nh, ch)
			if e := firstDiff(got.F32(), want.F32()[(pl+k)*ch:(pl+k+1)*ch]); e >= 0 {
				t.Fatalf("sample %d token %d: decode %g, packed %g", i, k, got.F32()[e], want.F32()[(pl+k)*ch+e])
			}
		}
	}
}

// TestDecodeRuns: a decode step's chunks are the runs of rows that read one prompt (its own
// slot, then the slots sharing it) when there are at least twice as many runs as workers,
// and single rows otherwise.
func TestDecodeRuns(t *testing.T) {
	// Slots 0-3 hold prompts; slots 4-11 share them: 4 and 5 share slot 0's, 6-8 slot 1's,
	// 9 slot 2's, 10 and 11 slot 3's. Slot 12 shares nothing.
	shared := make([]int32, 2*13)
	for s, src := range map[int]int32{4: 0, 5: 0, 6: 1, 7: 1, 8: 1, 9: 2, 10: 3, 11: 3} {
		shared[2*s], shared[2*s+1] = src, 5
	}
	for _, c := range []struct {
		name    string
		slot    []int32
		shared  []int32
		workers int
		want    []int32
	}{
		{"groups", []int32{0, 4, 5, 1, 6, 7, 8, 2, 9, 3, 10, 11}, shared, 2, []int32{0, 3, 7, 9, 12}},
		{"a group's rows apart", []int32{4, 0, 6, 5, 1, 7, 9, 2, 10}, shared, 2, []int32{0, 2, 3, 4, 6, 8, 9}},
		{"unshared slots, one run each", []int32{12, 0, 1, 2}, shared, 2, []int32{0, 1, 2, 3, 4}},
		{"too few runs: rows", []int32{0, 4, 5, 1, 6, 7, 8}, shared, 2, []int32{0, 1, 2, 3, 4, 5, 6, 7}},
		{"too few runs for 3 workers: rows", []int32{0, 4, 5, 1, 6, 7, 8, 2, 9, 3, 10, 11}, shared, 3, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{"no sharing", []int32{3, 1, 0, 2}, nil, 2, []int32{0, 1, 2, 3, 4}},
	} {
		if got := decodeRuns(nil, c.slot, c.shared, c.workers); !slices.Equal(got, c.want) {
			t.Errorf("%s: runs %v, want %v", c.name, got, c.want)
		}
	}
}

// TestAttentionDecodeInRuns: a step of several prompts' samples, attended in runs of a
// prompt's rows, gives every row the bits it gets decoded alone.
func TestAttentionDecodeInRuns(t *testing.T) {
	c, r := New(2), rand.New(rand.NewPCG(31, 32))
	const nh, ch, capacity, pl, prompts, group = 2, 32, 12, 5, 5, 3
	slots := prompts * group
	kv := backend.KV{K: c.Alloc(slots * capacity * ch), V: c.Alloc(slots * capacity * ch), Cap: capacity, Shared: c.AllocI32(2 * slots)}
	// Sample j of prompt p decodes in slot p·group + j; slot p·group holds the prompt.
	for p := range prompts {
		sl, pos := make([]int32, pl), make([]int32, pl)
		for i := range pl {
			sl[i], pos[i] = int32(p*group), int32(i)
		}
		c.KVWrite(kv, buf(c, randVec(r, pl*3*ch, 1)), ibuf(c, sl), ibuf(c, pos), pl, ch)
		for j := 1; j < group; j++ {
			kv.Shared.Ints()[2*(p*group+j)], kv.Shared.Ints()[2*(p*group+j)+1] = int32(p*group), pl
		}
	}
	slot, pos := make([]int32, slots), make([]int32, slots)
	for step := range 4 {
		for s := range slots {
			slot[s], pos[s] = int32(s), int32(pl+step)
		}
		q := buf(c, randVec(r, slots*3*ch, 1))
		c.KVWrite(kv, q, ibuf(c, slot), ibuf(c, pos), slots, ch)
		if got := decodeRuns(nil, slot, kv.Shared.Ints(), 2); len(got) != prompts+1 {
			t.Fatalf("runs %v: the step is not cut into its %d prompts' runs", got, prompts)
		}
		alone := make([]float32, slots*ch)
		for s := range slots {
			out := c.Alloc(ch)
			c.AttentionDecode(out, q.Slice(s*3*ch, 3*ch), kv, ibuf(c, slot[s:s+1]), ibuf(c, pos[s:s+1]), 1, nh, ch)
			copy(alone[s*ch:], out.F32())
		}
		// 1 and 2 workers take the step in runs, 3 row by row (5 runs are fewer than 6).
		for threads := 1; threads <= 3; threads++ {
			ct := New(threads)
			all := ct.Alloc(slots * ch)
			ct.AttentionDecode(all, q, kv, ibuf(ct, slot), ibuf(ct, pos), slots, nh, ch)
			if e := firstDiff(all.F32(), alone); e >= 0 {
				t.Fatalf("step %d, %d threads, element %d: in the step %g, alone %g", step, threads, e, all.F32()[e], alone[e])
			}
		}
	}
}

func TestGELU(t *testing.T) {
	c, r := New(2), rand.New(rand.NewPCG(11, 12))
	const n = 70001 // several elementwise chunks plus a ragged tail
	x, dout := randVec(r, n, 3), randVec(r, n, 1)
	bx, out := buf(c, x), c.Alloc(n)
	forward := func() float64 {
		c.GELU(out, bx)
		return dot64(dout, out.F32())
	}
	forward()
	want := make([]float64, n)
	for i, v := range x {
		xv := float64(v)
		want[i] = 0.5 * xv * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(xv+0.044715*xv*xv*xv)))
	}
	if d := maxAbsDiff(out.F32(), want); d > 1e-6 {
		t.Fatalf("GELU differs from the float64 formula by %g", d)
	}
	dx := c.Alloc(n)
	c.GELUBackward(dx, bx, buf(c, dout))
	// Elementwise: check the derivative directly at every element against a float64
	// central difference.
	worst := 0.0
	for i, v := range x {
		xv, h := float64(v), 1e-4
		g := func(u float64) float64 { return 0.5 * u * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(u+0.044715*u*u*u))) }
		num := (g(xv+h) - g(xv-h)) / (2 * h) * float64(dout[i])
		worst = max(worst, math.Abs(num-float64(dx.F32()[i])))
	}
	if worst > 2e-6 {
		t.Fatalf("GELU backward differs from the finite difference by %g", worst)
	}
}

func TestLogProbs(t *testing.T) {
	c, r := New(2), rand.New(rand.NewPCG(13, 14))
	const rows, v = 5, 1031
	const invTemp = 1.25
	logits := randVec(r, rows*v, 2)
	targets := []int32{0, 1030, 17, 17, 512}
	a, e := randVec(r, rows, 1), randVec(r, rows, 0.3)
	bl, bt := buf(c, logits), ibuf(c, targets)
	lse, logp, ent := c.Alloc(rows), c.Alloc(rows), c.Alloc(rows)
	forward := func() float64 {
		c.LogProbs(lse, logp, ent, bl, bt, rows, v, invTemp)
		return dot64(a, logp.F32()) + dot64(e, ent.F32())
	}
	forward()
	for i := range rows {
		z := make([]float64, v)
		m := math.Inf(-1)
		for k := range v {
			z[k] = float64(logits[i*v+k]) * invTemp
			m = max(m, z[k])
		}
		s := 0.0
		for k := range v {
			s += math.Exp(z[k] - m)
		}
		l := m + math.Log(s)
		h := 0.0
		for k := range v {
			lp := z[k] - l
			h -= math.Exp(lp) * lp
		}
		if d := math.Abs(float64(logp.F32()[i]) - (z[targets[i]] - l)); d > 2e-6 {
			t.Errorf("row %d: logp off by %g", i, d)
		}
		if d := math.Abs(float64(ent.F32()[i]) - h); d > 2e-5 {
			t.Errorf("row %d: entropy off by %g", i, d)
		}
	}
	grad := append([]float32(nil), logits...)
	bg := buf(c, grad)
	c.LogProbsBackward(bg, lse, ent, buf(c, a), buf(c, e), bt, rows, v, invTemp)
	checkFD(t, "dlogits", bl.F32(), bg.F32(), forward, 1e-2, 2e-3)
}

// TestSoftmax: the sampler's distribution against float64, and its log-sum-exp is LogProbs's
// bit for bit (DESIGN §6.1: a recorded logprob, logit·invTemp − lse, is the forward's).
func TestSoftmax(t *testing.T) {
	c, r := New(2), rand.New(rand.NewPCG(23, 24))
	const rows, v = 3, 1037
	logits := randVec(r, rows*v, 3)
	probs, lse := c.Alloc(rows*v), c.Alloc(rows)
	c.Softmax(probs, lse, buf(c, logits), rows, v, 0.8)
	lpLse, logp := c.Alloc(rows), c.Alloc(rows)
	c.LogProbs(lpLse, logp, backend.Buf{}, buf(c, logits), ibuf(c, []int32{3, 1000, 0}), rows, v, 0.8)
	if i := firstDiff(lse.F32(), lpLse.F32()); i >= 0 {
		t.Fatalf("row %d: Softmax's log-sum-exp %v, LogProbs's %v", i, lse.F32()[i], lpLse.F32()[i])
	}
	for i := range rows {
		m, s := math.Inf(-1), 0.0
		for k := range v {
			m = max(m, float64(logits[i*v+k])*0.8)
		}
		for k := range v {
			s += math.Exp(float64(logits[i*v+k])*0.8 - m)
		}
		l := m + math.Log(s)
		if d := math.Abs(float64(lse.F32()[i]) - l); d > 2e-6 {
			t.Errorf("row %d: lse off by %g", i, d)
		}
		for k := range v {
			want := math.Exp(float64(logits[i*v+k])*0.8 - l)
			if d := math.Abs(float64(probs.F32()[i*v+k]) - want); d > 1e-6*want+1e-12 {
				t.Fatalf("row %d token %d: p = %g, want %g", i, k, probs.F32()[i*v+k], want)
			}
		}
	}
}

func TestAdamW(t *testing.T) {
	c, r := New(2), rand.New(rand.NewPCG(15, 16))
	const n = 40003
	p, g, m, v := randVec(r, n, 1), randVec(r, n, 1), randVec(r, n, 0.1), randVec(r, n, 0.1)
	for i := range v {
		v[i] = v[i] * v[i]
	}
	h := backend.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 3}
	bp, bm, bv := buf(c, p), buf(c, m), buf(c, v)
	c.AdamW(bp, buf(c, g), bm, bv, h)
	bc1, bc2 := 1-math.Pow(0.9, 3), 1-math.Pow(0.95, 3)
	for i := range p {
		mi := 0.9*float64(m[i]) + 0.1*float64(g[i])
		vi := 0.95*float64(v[i]) + 0.05*float64(g[i])*float64(g[i])
		want := float64(p[i])*(1-1e-2*0.1) - 1e-2/bc1*mi/(math.Sqrt(vi)/math.Sqrt(bc2)+1e-8)
		if d := math.Abs(float64(bp.F32()[i]) - want); d > 1e-6 {
			t.Fatalf("p[%d] = %g, want %g", i, bp.F32()[i], want)
		}
	}
}

func TestSumSquaresAndDeterminism(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	x := randVec(r, 300007, 1)
	want := 0.0
	for _, v := range x {
		want += float64(v) * float64(v)
	}
	var first float64
	for threads := 1; threads <= 3; threads++ {
		c := New(threads)
		got := c.SumSquares(buf(c, x))
		if math.Abs(got-want) > 1e-9*want {
			t.Fatalf("SumSquares = %g, want %g", got, want)
		}
		if threads == 1 {
			first = got
		} else if got != first {
			t.Fatalf("SumSquares with %d threads = %v, with 1 thread %v: not deterministic", threads, got, first)
		}
	}
	x[12345] = float32(math.NaN())
	c := New(2)
	if s := c.SumSquares(buf(c, x)); !math.IsNaN(s) {
		t.Fatalf("SumSquares with a NaN element = %g", s)
	}
}

// TestSumSquaresMany: each span's sum has the bits SumSquares gives for the span alone, on
// any thread count, so gradient norms do not change by a bit for coming from one call; a NaN
// reaches its own span's sum only.
func TestSumSquaresMany(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	x := randVec(r, 300007, 1)
	x[200000] = float32(math.NaN())
	spans := []backend.Span{{Off: 0, N: 131073}, {Off: 131073, N: 0}, {Off: 131073, N: 768}, {Off: 131841, N: 168166}, {Off: 7, N: 5}}
	for threads := 1; threads <= 3; threads++ {
		c := New(threads)
		b := buf(c, x)
		got := make([]float64, len(spans))
		c.SumSquaresMany(b, spans, got)
		for i, s := range spans {
			want := c.SumSquares(b.Slice(s.Off, s.N))
			if math.Float64bits(got[i]) != math.Float64bits(want) {
				t.Fatalf("%d threads: span %d = %v, SumSquares of it %v", threads, i, got[i], want)
			}
			if math.IsNaN(got[i]) != (i == 3) {
				t.Fatalf("%d threads: span %d = %v; only span 3 holds the NaN", threads, i, got[i])
			}
		}
	}
}

// TestAdamWNoDecay: one update with spans that take no weight decay has the bits of a call
// per run of elements alike, the spans' with WeightDecay 0 (how the optimizer updated a
// model before it made one call), and the spans change the result.
func TestAdamWNoDecay(t *testing.T) {
	c, r := New(2), rand.New(rand.NewPCG(23, 24))
	const n = 40003
	g := buf(c, randVec(r, n, 1))
	init := [][]float32{randVec(r, n, 1), randVec(r, n, 0.1), randVec(r, n, 0.1)}
	for i := range init[2] {
		init[2][i] *= init[2][i]
	}
	state := func() (p, m, v backend.Buf) { return buf(c, init[0]), buf(c, init[1]), buf(c, init[2]) }
	h := backend.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 3,
		NoDecay: []backend.Span{{Off: 0, N: 5}, {Off: 1000, N: 0}, {Off: 1000, N: 17000}, {Off: 39000, N: 1003}}}
	p1, m1, v1 := state()
	c.AdamW(p1, g, m1, v1, h)

	p2, m2, v2 := state()
	for _, run := range []struct {
		off, n int
		wd     float32
	}{{0, 5, 0}, {5, 995, 0.1}, {1000, 17000, 0}, {18000, 21000, 0.1}, {39000, 1003, 0}} {
		hr := h
		hr.NoDecay, hr.WeightDecay = nil, run.wd
		c.AdamW(p2.Slice(run.off, run.n), g.Slice(run.off, run.n), m2.Slice(run.off, run.n), v2.Slice(run.off, run.n), hr)
	}
	for _, x := range [][2]backend.Buf{{p1, p2}, {m1, m2}, {v1, v2}} {
		for i := range x[0].F32() {
			if math.Float32bits(x[0].F32()[i]) != math.Float32bits(x[1].F32()[i]) {
				t.Fatalf("element %d: %v in one call, %v in a call per run", i, x[0].F32()[i], x[1].F32()[i])
			}
		}
	}

	p3, m3, v3 := state()
	h.NoDecay = nil
	c.AdamW(p3, g, m3, v3, h)
	if p3.F32()[2] == p1.F32()[2] || p3.F32()[2000] == p1.F32()[2000] || p3.F32()[500] != p1.F32()[500] {
		t.Fatal("the spans without decay do not change the update")
	}
}

// TestThreadCountInvariance: the partition of every reduction depends on the problem size
// only, so 1, 2 or 3 threads give bit-identical gradients.
func TestThreadCountInvariance(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	const n, ch = 53, 24
	inp, w, b, dout := randVec(r, n*ch, 1), randVec(r, ch, 1), randVec(r, ch, 1), randVec(r, n*ch, 1)
	var ref []float32
	for threads := 1; threads <= 3; threads++ {
		c := New(threads)
		out, mean, rstd := c.Alloc(n*ch), c.Alloc(n), c.Alloc(n)
		bi, bw := buf(c, inp), buf(c, w)
		c.LayerNorm(out, mean, rstd, bi, bw, buf(c, b), n, ch, 1e-5)
		dinp, dw, db := c.Alloc(n*ch), c.Alloc(ch), c.Alloc(ch)
		c.LayerNormBackward(dinp, dw, db, buf(c, dout), bi, bw, mean, rstd, n, ch)
		got := append(append(append([]float32{}, out.F32()...), dw.F32()...), db.F32()...)
		if ref == nil {
			ref = got
			continue
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(ref[i]) {
				t.Fatalf("%d threads: element %d = %v, 1 thread: %v", threads, i, got[i], ref[i])
			}
		}
	}
}

// BenchmarkAttentionForward: the training forward's attention of one layer of GPT-2 124M (12
// heads of 64) over a GRPO group as the update packs it: a prompt of 79 rows, then 8
// completions of 64 rows continuing it.
func BenchmarkAttentionForward(b *testing.B) {
	const nh, ch, pl, g, l = 12, 768, 79, 8, 64
	p := backend.Pack{Start: []int32{0}, Len: []int32{pl}, Prefix: []int32{-1}}
	for i := range g {
		p.Start, p.Len, p.Prefix = append(p.Start, int32(pl+i*l)), append(p.Len, l), append(p.Prefix, 0)
	}
	c, r := New(2), rand.New(rand.NewPCG(1, 1))
	n := p.Rows()
	qkv, out, lse := buf(c, randVec(r, n*3*ch, 1)), c.Alloc(n*ch), c.Alloc(n*nh)
	c0 := processCPU()
	for b.Loop() {
		c.Attention(out, lse, qkv, p, nh, ch)
	}
	b.ReportMetric((processCPU()-c0)*1e3/float64(b.N), "cpu-ms/op")
}

// processCPU is this process's CPU time, all threads, in seconds: a benchmark's cost that
// other work on a shared machine disturbs less than its wall time.
func processCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// layerNormRef is the LayerNorm forward's arithmetic in Go, one row (kernels.c must match it
// bit for bit): the mean from four float64 accumulators, (a + b) + (c + d), rounded, over c;
// the variance as float64 sums of float32 squares in element order; then
// ((x − mean)·rstd)·w + b in float32.
func layerNormRef(out, x, w, b []float32, eps float32) (mean, rstd float32) {
	var a0, a1, a2, a3 float64
	k := 0
	for ; k+4 <= len(x); k += 4 {
		a0 += float64(x[k])
		a1 += float64(x[k+1])
		a2 += float64(x[k+2])
		a3 += float64(x[k+3])
	}
	for ; k < len(x); k++ {
		a0 += float64(x[k])
	}
	m := float32((a0+a1)+(a2+a3)) / float32(len(x))
	var v float64
	for _, xv := range x {
		d := xv - m
		v += float64(d * d)
	}
	r := float32(1 / math.Sqrt(v/float64(len(x))+float64(eps)))
	for k, xv := range x {
		out[k] = (xv-m)*r*w[k] + b[k]
	}
	return m, r
}

// TestLayerNormMatchesReference: the C kernel's paths (eight rows in vector lanes, and the
// scalar rows) give layerNormRef's outputs, means and 1/σ bit for bit, at row counts that
// leave rows to each path and channel counts that leave tails to every loop.
func TestLayerNormMatchesReference(t *testing.T) {
	layerNormCases(t, 7, func(name string, r *rand.Rand, x, w, b []float32, n, ch int) {
		out, mean, rstd := make([]float32, n*ch), make([]float32, n), make([]float32, n)
		cLayerNorm(out, mean, rstd, x, w, b, n, ch, 1e-5)
		want := make([]float32, ch)
		for i := range n {
			m, s := layerNormRef(want, x[i*ch:(i+1)*ch], w, b, 1e-5)
			if math.Float32bits(m) != math.Float32bits(mean[i]) || math.Float32bits(s) != math.Float32bits(rstd[i]) {
				t.Fatalf("%s, row %d: mean, rstd %g %g, reference %g %g", name, i, mean[i], rstd[i], m, s)
			}
			for k, v := range want {
				if got := out[i*ch+k]; math.Float32bits(got) != math.Float32bits(v) {
					t.Fatalf("%s, row %d element %d: %g, reference %g", name, i, k, got, v)
				}
			}
		}
	})
}

// layerNormCases runs check on both paths of the LayerNorm kernels (eight rows in vector
// lanes, and scalar rows; the vector one only where the processor has AVX2), at row counts
// that leave rows to each path and channel counts that leave tails to every loop, with rows
// whose means lie far from 0, where the variance's rounding shows.
func layerNormCases(t *testing.T, seed uint64, check func(name string, r *rand.Rand, x, w, b []float32, n, ch int)) {
	t.Helper()
	defer setAVX2(true)
	r := rand.New(rand.NewPCG(seed, seed+1))
	for _, vector := range []bool{true, false} {
		if vector && !hasAVX2() {
			continue // the scalar path alone is this processor's
		}
		setAVX2(vector)
		for _, ch := range []int{768, 13, 3, 771} {
			for _, n := range []int{1, 8, 13, 37} {
				x, w, b := randVec(r, n*ch, 3), randVec(r, ch, 1), randVec(r, ch, 1)
				for i := range x {
					x[i] += float32(i/ch%5) * 40
				}
				check(fmt.Sprintf("vector %v, %d×%d", vector, n, ch), r, x, w, b, n, ch)
			}
		}
	}
}

// layerNormBackwardRef is the LayerNorm backward's arithmetic in Go, one row (kernels.c must
// match it bit for bit): the sums of dn = w·dout and of dn·(x − mean)·rstd in float64 in element
// order, then per element dw += dout·norm, db += dout, dinp += ((w·dout − mean1) − norm·mean2)·rstd.
func layerNormBackwardRef(di, dw, db, d, x, w []float32, m, r float32) {
	var s1, s2 float64
	for k, xv := range x {
		dn := w[k] * d[k]
		s1 += float64(dn)
		s2 += float64(dn * (xv - m) * r)
	}
	c := float64(len(x))
	mean1, mean2 := float32(s1/c), float32(s2/c)
	for k, xv := range x {
		norm := (xv - m) * r
		dw[k] += d[k] * norm
		db[k] += d[k]
		di[k] += (w[k]*d[k] - mean1 - norm*mean2) * r
	}
}

// TestLayerNormBackwardMatchesReference: the C backward's paths (eight rows' sums in vector
// lanes, the scalar rows) give layerNormBackwardRef's input gradients and dw, db bit for bit,
// the rows' terms added in row order.
func TestLayerNormBackwardMatchesReference(t *testing.T) {
	layerNormCases(t, 9, func(name string, r *rand.Rand, x, w, b []float32, n, ch int) {
		mean, rstd, y := make([]float32, n), make([]float32, n), make([]float32, ch)
		for i := range n {
			mean[i], rstd[i] = layerNormRef(y, x[i*ch:(i+1)*ch], w, b, 1e-5)
		}
		d := randVec(r, n*ch, 1)
		di, dw, db := randVec(r, n*ch, 1), randVec(r, ch, 1), randVec(r, ch, 1)
		wdi, wdw, wdb := append([]float32(nil), di...), append([]float32(nil), dw...), append([]float32(nil), db...)
		cLayerNormBackward(di, dw, db, d, x, w, mean, rstd, n, ch)
		for i := range n {
			layerNormBackwardRef(wdi[i*ch:(i+1)*ch], wdw, wdb, d[i*ch:(i+1)*ch], x[i*ch:(i+1)*ch], w, mean[i], rstd[i])
		}
		for what, p := range map[string][2][]float32{"dinp": {di, wdi}, "dw": {dw, wdw}, "db": {db, wdb}} {
			if i := firstDiff(p[0], p[1]); i >= 0 {
				t.Fatalf("%s: %s[%d] = %g, reference %g", name, what, i, p[0][i], p[1][i])
			}
		}
	})
}

// TestFill: Fill writes every element, in chunks of ewGrain and, for a zero fill of a buffer
// of two or more zeroGrain chunks, of zeroGrain (a ragged last chunk each time).
func TestFill(t *testing.T) {
	c := New(2)
	for _, n := range []int{ewGrain + 5, 2*zeroGrain + 7} {
		b := c.Alloc(n)
		for _, v := range []float32{1.5, 0, -2} {
			c.Fill(b, v)
			for i, x := range b.F32() {
				if x != v {
					t.Fatalf("%d elements, Fill(%g): element %d is %g", n, v, i, x)
				}
			}
		}
	}
}

// KVWrite's C copies go only where the checks before them allow: a row whose destination is
// outside the cache panics, and nothing is written for any row.
func TestKVWriteBounds(t *testing.T) {
	c := New(2)
	const ch, capacity, slots = 16, 4, 2
	kv := backend.KV{K: c.Alloc(slots * capacity * ch), V: c.Alloc(slots * capacity * ch), Cap: capacity}
	q := make([]float32, 2*3*ch)
	for i := range q {
		q[i] = float32(i + 1)
	}
	for _, tc := range []struct {
		name      string
		slot, pos []int32
	}{
		{"position past the capacity", []int32{0, 1}, []int32{0, capacity}},
		{"slot past the cache", []int32{0, slots}, []int32{0, 1}},
		{"negative slot", []int32{0, -1}, []int32{0, 1}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tc.name)
				}
			}()
			c.KVWrite(kv, buf(c, q), ibuf(c, tc.slot), ibuf(c, tc.pos), 2, ch)
		}()
		for _, v := range kv.K.F32() {
			if v != 0 {
				t.Fatalf("%s: the cache was written before the panic", tc.name)
			}
		}
	}
	c.KVWrite(kv, buf(c, q), ibuf(c, []int32{1, 0}), ibuf(c, []int32{3, 2}), 2, ch)
	k, v := kv.K.F32(), kv.V.F32()
	for e := range ch {
		if k[(1*capacity+3)*ch+e] != q[ch+e] || v[(0*capacity+2)*ch+e] != q[3*ch+2*ch+e] {
			t.Fatalf("channel %d: keys and values not where slot and position put them", e)
		}
	}
}
