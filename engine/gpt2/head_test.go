package gpt2

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cpu"
)

// counting is a CPU backend that records what it allocates.
type counting struct {
	*cpu.CPU
	floats  int64 // float32 and int32 elements allocated in all
	largest int   // the largest single allocation
}

func (c *counting) Alloc(n int) backend.Buf {
	c.floats += int64(n)
	c.largest = max(c.largest, n)
	return c.CPU.Alloc(n)
}

func (c *counting) AllocI32(n int) backend.I32 {
	c.floats += int64(n)
	c.largest = max(c.largest, n)
	return c.CPU.AllocI32(n)
}

// headBatch is a packed batch of sequences of the given lengths, each scored from from[i].
func headBatch(r *rand.Rand, v int, lens, from []int) *Batch {
	var b Batch
	for i, l := range lens {
		b.Add(randSeq(r, l, v), from[i])
	}
	return &b
}

// firstBitDiff is the first index where a and b differ in their bits, or -1 (0 for lengths that differ).
func firstBitDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// maxRel is the largest |a-b| over the largest |b|.
func maxRel(a, b []float32) float64 {
	d, s := 0.0, 1e-30
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
		s = max(s, math.Abs(float64(b[i])))
	}
	return d / s
}

// TestHeadChunks: the LM head in chunks of any number of rows gives the same log-probabilities
// and entropies bit for bit (DESIGN §6.1), and the same gradients up to float rounding (the
// backward's GEMMs round by their row counts, and the tied embedding's gradient sums chunk by
// chunk) — through Backward (logits recomputed) and through ForwardBackward (each chunk's
// gradient taken while its logits are in memory).
func TestHeadChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	b := headBatch(r, testConfig.VocabSize, []int{9, 4, 16, 1, 12}, []int{0, 2, 5, 0, 3})
	w, e := make([]float32, len(b.Rows)), make([]float32, len(b.Rows))
	for i := range w {
		w[i], e[i] = float32(r.NormFloat64()), float32(0.2*r.NormFloat64())
	}
	const temp = 0.85
	run := func(headRows int, fused bool) (Output, []float32) {
		m := newTestModel(t, testConfig, 33)
		m.HeadRows = headRows
		m.ZeroGrads()
		var out Output
		if fused {
			next := 0
			err := m.ForwardBackward(b, temp, true, func(lo int, logp, ent, dlogp, dent []float32) {
				if lo != next || len(ent) != len(logp) || len(dlogp) != len(logp) || len(dent) != len(logp) {
					t.Fatalf("chunk at row %d of %d rows (expected row %d)", lo, len(logp), next)
				}
				next += len(logp)
				copy(dlogp, w[lo:])
				copy(dent, e[lo:])
			}, &out)
			if err != nil {
				t.Fatal(err)
			}
			if next != len(b.Rows) {
				t.Fatalf("row gradients asked for %d of %d rows", next, len(b.Rows))
			}
		} else {
			if err := m.Forward(b, temp, true, &out); err != nil {
				t.Fatal(err)
			}
			if err := m.Backward(w, e); err != nil {
				t.Fatal(err)
			}
		}
		return out, m.GradsHost()
	}
	want, wantG := run(0, false) // one chunk: every scored row at once
	wte := NewLayout(testConfig).Tensors[0]
	for _, c := range []struct {
		rows  int
		fused bool
	}{{1, false}, {3, false}, {7, false}, {41, false}, {1, true}, {5, true}, {0, true}} {
		out, g := run(c.rows, c.fused)
		if i := firstBitDiff(out.LogP, want.LogP); i >= 0 {
			t.Errorf("chunks of %d (fused %v): logp[%d] = %v, in one chunk %v", c.rows, c.fused, i, out.LogP[i], want.LogP[i])
		}
		if i := firstBitDiff(out.Entropy, want.Entropy); i >= 0 {
			t.Errorf("chunks of %d (fused %v): entropy[%d] = %v, in one chunk %v", c.rows, c.fused, i, out.Entropy[i], want.Entropy[i])
		}
		if d := maxRel(g[:wte.Size], wantG[:wte.Size]); d > 1e-6 {
			t.Errorf("chunks of %d (fused %v): wte gradient differs by %.2g of its largest", c.rows, c.fused, d)
		}
		if d := maxRel(g[wte.Size:], wantG[wte.Size:]); d > 1e-6 {
			t.Errorf("chunks of %d (fused %v): gradients differ by %.2g of the largest", c.rows, c.fused, d)
		}
	}
}

// TestHeadChunksEqual: the scored rows run in as few chunks as HeadRows allows, of sizes
// that differ by a row at most — never a small remainder, whose products run slowly.
func TestHeadChunksEqual(t *testing.T) {
	r := rand.New(rand.NewPCG(40, 41))
	for _, c := range []struct {
		headRows, scored int
		want             []int
	}{
		{4, 9, []int{3, 3, 3}},
		{4, 8, []int{4, 4}},
		{5, 11, []int{4, 4, 3}},
		{16, 7, []int{7}},
		{1, 3, []int{1, 1, 1}},
	} {
		b := headBatch(r, testConfig.VocabSize, []int{c.scored + 1}, []int{0})
		m := newTestModel(t, testConfig, 42)
		m.HeadRows = c.headRows
		var got []int
		err := m.ForwardBackward(b, 1, false, func(lo int, logp, _, dlogp, _ []float32) {
			got = append(got, len(logp))
		}, &Output{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%d scored rows in chunks of up to %d: chunks of %v, want %v", c.scored, c.headRows, got, c.want)
		}
	}
}

// TestForwardBackwardIsBackward: with the same chunks, the fused pass and Forward + Backward
// run the same arithmetic: bit-identical gradients — also when the loss reads each row's
// entropy but gives it a zero gradient (−0, as a zero coefficient times a weight makes),
// which is Backward without an entropy gradient.
func TestForwardBackwardIsBackward(t *testing.T) {
	r := rand.New(rand.NewPCG(34, 35))
	b := headBatch(r, testConfig.VocabSize, []int{11, 6, 14}, []int{1, 0, 4})
	w := make([]float32, len(b.Rows))
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	for _, entropy := range []bool{false, true} {
		a, f := newTestModel(t, testConfig, 36), newTestModel(t, testConfig, 36)
		a.HeadRows, f.HeadRows = 4, 4
		var oa, of Output
		if err := a.Forward(b, 1.2, entropy, &oa); err != nil {
			t.Fatal(err)
		}
		a.ZeroGrads()
		if err := a.Backward(w, nil); err != nil {
			t.Fatal(err)
		}
		f.ZeroGrads()
		err := f.ForwardBackward(b, 1.2, entropy, func(lo int, logp, ent, dlogp, dent []float32) {
			if (ent != nil) != entropy || (dent != nil) != entropy {
				t.Fatalf("entropy %v: entropy slices %v, %v", entropy, ent != nil, dent != nil)
			}
			if i := firstBitDiff(logp, oa.LogP[lo:lo+len(logp)]); i >= 0 {
				t.Fatalf("row %d: the row gradient sees logp %g, Forward gave %g", lo+i, logp[i], oa.LogP[lo+i])
			}
			copy(dlogp, w[lo:])
			for i := range dent {
				dent[i] = float32(math.Copysign(0, -1))
			}
		}, &of)
		if err != nil {
			t.Fatal(err)
		}
		if i := firstBitDiff(a.GradsHost(), f.GradsHost()); i >= 0 {
			t.Fatalf("entropy %v: gradient %d differs between Backward and ForwardBackward", entropy, i)
		}
		if err := f.Backward(w, nil); err == nil {
			t.Error("Backward after ForwardBackward: no error (its activations are spent)")
		}
		if err := f.ForwardBackward(b, 1, false, nil, &of); err == nil {
			t.Error("ForwardBackward without a row gradient: no error")
		}
	}
}

// TestScoreIsForward: Score gives Forward's numbers bit for bit, holds one layer's
// activations instead of every layer's, and leaves nothing for Backward.
func TestScoreIsForward(t *testing.T) {
	cfg := testConfig
	cfg.NumLayers = 4
	r := rand.New(rand.NewPCG(37, 38))
	b := headBatch(r, cfg.VocabSize, []int{13, 2, 9}, []int{0, 0, 3})
	be := &counting{CPU: cpu.New(2)}
	s, err := New(be, cfg, testParams(cfg, 39))
	if err != nil {
		t.Fatal(err)
	}
	base := be.floats
	var want, got Output
	if err := s.Score(b, 0.9, true, &got); err != nil {
		t.Fatal(err)
	}
	scoring := be.floats - base
	f := newTestModel(t, cfg, 39)
	if err := f.Forward(b, 0.9, true, &want); err != nil {
		t.Fatal(err)
	}
	if i := firstBitDiff(got.LogP, want.LogP); i >= 0 {
		t.Fatalf("logp[%d]: Score %g, Forward %g", i, got.LogP[i], want.LogP[i])
	}
	if i := firstBitDiff(got.Entropy, want.Entropy); i >= 0 {
		t.Fatalf("entropy[%d] differs", i)
	}
	n := roundRows(len(b.Tokens))
	if want := cfg.Footprint(Use{Rows: len(b.Tokens), Scored: len(b.Rows)}); scoring*4 != want.Activations+want.Head {
		t.Errorf("Score allocated %d bytes, its footprint is %d", scoring*4, want.Activations+want.Head)
	}
	if limit := int64(n * (layerFloats(cfg) + trunkFloats(cfg))); scoring > limit+int64(len(b.Rows)*(scoredFloats(cfg)+cfg.VocabSize)) {
		t.Errorf("Score allocated %d floats: more than one layer's activations", scoring)
	}
	if err := s.Backward(make([]float32, len(b.Rows)), nil); err == nil {
		t.Error("Backward after Score: no error")
	}
}

// vocabConfig has GPT-2's vocabulary and almost nothing else, so that the LM head dominates.
var vocabConfig = Config{VocabSize: 50257, MaxSeqLen: 64, NumLayers: 1, NumHeads: 2, Channels: 8, LayerNormE: 1e-5}

// TestHeadMemory: training on 512 scored rows of a 50257-token vocabulary never allocates
// rows × V logits (103 MB here): the head holds one chunk, and everything the model allocates
// is what Footprint says, to the byte — for Forward + Backward, ForwardBackward, Score and
// sampling.
func TestHeadMemory(t *testing.T) {
	cfg := vocabConfig
	r := rand.New(rand.NewPCG(40, 41))
	lens := []int{64, 64, 64, 64, 64, 64, 64, 64, 9}
	b := headBatch(r, cfg.VocabSize, lens, make([]int, len(lens)))
	rows := len(b.Rows)
	w := make([]float32, rows)
	for i := range w {
		w[i] = -1 / float32(rows)
	}
	chunk := headRowsFor(cfg.VocabSize)
	for _, c := range []struct {
		name string
		use  Use
		run  func(m *Model) error
	}{
		{"Forward+Backward", Use{Train: true, Rows: len(b.Tokens), Scored: rows}, func(m *Model) error {
			if err := m.Forward(b, 1, false, &Output{}); err != nil {
				return err
			}
			return m.Backward(w, nil)
		}},
		{"ForwardBackward", Use{Train: true, Rows: len(b.Tokens), Scored: rows}, func(m *Model) error {
			return m.ForwardBackward(b, 1, true, func(lo int, _, _, dlogp, _ []float32) { copy(dlogp, w[lo:]) }, &Output{})
		}},
		{"Score", Use{Rows: len(b.Tokens), Scored: rows}, func(m *Model) error { return m.Score(b, 1, true, &Output{}) }},
		{"Prefill+Decode", Use{Rows: len(b.Tokens), KVSlots: len(lens), KVCap: 64, SampleRows: len(lens)}, func(m *Model) error {
			kv, err := m.NewKVCache(len(lens), 64)
			if err != nil {
				return err
			}
			short := Batch{Tokens: b.Tokens, Lens: slices.Clone(b.Lens)}
			short.Lens[len(lens)-1] = 8 // room for one decode step in the last slot
			short.Tokens = short.Tokens[:len(short.Tokens)-1]
			slots := make([]int32, len(lens))
			for i := range slots {
				slots[i] = int32(i)
			}
			if _, err := m.Prefill(kv, &short, slots, 1); err != nil {
				return err
			}
			_, err = m.Decode(kv, []int32{1}, []int32{int32(len(lens) - 1)}, []int32{8}, 1)
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			be := &counting{CPU: cpu.New(2)}
			m, err := New(be, cfg, RandomParams(cfg, 1))
			if err != nil {
				t.Fatal(err)
			}
			if c.use.Train {
				m.ZeroGrads()
			}
			if err := c.run(m); err != nil {
				t.Fatal(err)
			}
			if limit := chunk * cfg.VocabSize; be.largest > limit || rows*cfg.VocabSize <= limit {
				t.Errorf("largest allocation %d floats; one chunk of logits is %d, all rows' %d", be.largest, limit, rows*cfg.VocabSize)
			}
			want := cfg.Footprint(c.use)
			want.Moments = 0 // the optimizer's, not the model's
			if got := be.floats * 4; got != want.Total() {
				t.Errorf("allocated %d bytes; Footprint says %d (%s)", got, want.Total(), want)
			}
		})
	}
}

// TestThreadCountInvarianceModel: a chunked forward and backward give bit-identical results
// on 1, 2 and 3 threads.
func TestThreadCountInvarianceModel(t *testing.T) {
	cfg := Config{VocabSize: 301, MaxSeqLen: 40, NumLayers: 2, NumHeads: 3, Channels: 24, LayerNormE: 1e-5}
	r := rand.New(rand.NewPCG(42, 43))
	b := headBatch(r, cfg.VocabSize, []int{40, 17, 33}, []int{0, 5, 9})
	w := make([]float32, len(b.Rows))
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	run := func(threads int) ([]float32, []float32) {
		m, err := New(cpu.New(threads), cfg, testParams(cfg, 44))
		if err != nil {
			t.Fatal(err)
		}
		m.HeadRows = 16
		var out Output
		if err := m.Forward(b, 0.8, true, &out); err != nil {
			t.Fatal(err)
		}
		m.ZeroGrads()
		if err := m.Backward(w, nil); err != nil {
			t.Fatal(err)
		}
		return out.LogP, m.GradsHost()
	}
	lp1, g1 := run(1)
	for _, th := range []int{2, 3} {
		lp, g := run(th)
		if i := firstBitDiff(lp, lp1); i >= 0 {
			t.Errorf("%d threads: logp[%d] differs from 1 thread", th, i)
		}
		if i := firstBitDiff(g, g1); i >= 0 {
			t.Errorf("%d threads: grad[%d] differs from 1 thread", th, i)
		}
	}
}
