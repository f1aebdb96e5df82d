package gpt2

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rookscript/rookscript/engine/backend/cpu"
)

// testConfig is deliberately odd-sized: nothing is a multiple of a grain or block size.
var testConfig = Config{VocabSize: 23, MaxSeqLen: 16, NumLayers: 2, NumHeads: 2, Channels: 10, LayerNormE: 1e-5}

// testParams draws parameters with every tensor (LayerNorm and biases included) away from
// its default, so that a wrong gradient term anywhere shows.
func testParams(cfg Config, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 99))
	l := NewLayout(cfg)
	p := make([]float32, l.Total)
	for _, t := range l.Tensors {
		for i := range t.Size {
			v := r.NormFloat64()
			switch {
			case len(t.Shape) == 2:
				v *= 0.3
			case t.Name[len(t.Name)-6:] == "weight": // LayerNorm gains
				v = 1 + 0.2*v
			default:
				v *= 0.1
			}
			p[t.Off+i] = float32(v)
		}
	}
	return p
}

func newTestModel(t testing.TB, cfg Config, seed uint64) *Model {
	t.Helper()
	m, err := New(cpu.New(2), cfg, testParams(cfg, seed))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func randSeq(r *rand.Rand, n, v int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(r.IntN(v))
	}
	return s
}

// TestBackwardFiniteDifferences checks the gradient of every parameter tensor (sampled
// entries) of L = Σ w·logp + Σ e·H at temperature 0.8 against central differences: with the
// LM head in one chunk, in chunks of 3 rows (logits recomputed by Backward), and fused
// (ForwardBackward, chunks of 2 rows); and on a batch holding a prompt shared by three
// continuations.
func TestBackwardFiniteDifferences(t *testing.T) {
	for _, c := range []struct {
		name     string
		headRows int
		fused    bool
		prefixed bool
	}{{"one chunk", 0, false, false}, {"chunks of 3", 3, false, false}, {"fused, chunks of 2", 2, true, false},
		{"prefix and continuations", 0, false, true}, {"prefix and continuations, fused", 4, true, true}} {
		t.Run(c.name, func(t *testing.T) { finiteDifferences(t, c.headRows, c.fused, c.prefixed) })
	}
}

func finiteDifferences(t *testing.T, headRows int, fused, prefixed bool) {
	m := newTestModel(t, testConfig, 1)
	m.HeadRows = headRows
	r := rand.New(rand.NewPCG(2, 3))
	var b Batch
	b.Add(randSeq(r, 5, 23), 0)
	if prefixed { // a prompt of 4 and three completions, scored from their first row
		b.Add(randSeq(r, 4, 23), 4)
		b.AddContinuation(randSeq(r, 3, 23), 0)
		b.AddContinuation(randSeq(r, 1, 23), 0)
		b.AddContinuation(randSeq(r, 5, 23), 0)
	}
	b.Add(randSeq(r, 9, 23), 3)
	b.Add(randSeq(r, 1, 23), 0)
	b.Add(randSeq(r, 7, 23), 1)
	w := make([]float32, len(b.Rows))
	e := make([]float32, len(b.Rows))
	for i := range w {
		w[i], e[i] = float32(r.NormFloat64()), float32(0.3*r.NormFloat64())
	}
	const temp = 0.8
	loss := func() float64 {
		var out Output
		if err := m.Forward(&b, temp, true, &out); err != nil {
			t.Fatal(err)
		}
		s := 0.0
		for i := range w {
			s += float64(w[i])*float64(out.LogP[i]) + float64(e[i])*float64(out.Entropy[i])
		}
		return s
	}
	m.ZeroGrads()
	if fused {
		err := m.ForwardBackward(&b, temp, true, func(lo int, _, _, dlogp, dent []float32) {
			copy(dlogp, w[lo:])
			copy(dent, e[lo:])
		}, &Output{})
		if err != nil {
			t.Fatal(err)
		}
	} else {
		loss()
		if err := m.Backward(w, e); err != nil {
			t.Fatal(err)
		}
	}
	grads := m.GradsHost()
	params := m.ParamsHost()
	for _, tn := range m.Layout.Tensors {
		scale := 1e-12
		for _, g := range grads[tn.Off : tn.Off+tn.Size] {
			scale = max(scale, math.Abs(float64(g)))
		}
		worst := 0.0
		step := max(1, tn.Size/12)
		for i := 0; i < tn.Size; i += step {
			k := tn.Off + i
			orig := params[k]
			const h = 1e-2
			params[k] = orig + h
			m.SetParams(params)
			lp := loss()
			params[k] = orig - h
			m.SetParams(params)
			lm := loss()
			params[k] = orig
			num := (lp - lm) / (2 * h)
			worst = max(worst, math.Abs(num-float64(grads[k]))/scale)
		}
		m.SetParams(params)
		if worst > 5e-3 {
			t.Errorf("%s: finite-difference error %.2g of max |grad| %.3g", tn.Name, worst, scale)
		}
	}
}

// TestContinuationsAreConcatenations: a prompt packed once with G continuations gives each
// completion token the log-probability and entropy it gets with the prompt written in front
// of it bit for bit (DESIGN §6.1), and the same gradient as the G concatenations (the
// prompt's rows' gradient is the sum over its copies), through Forward + Backward and
// ForwardBackward.
func TestContinuationsAreConcatenations(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 13))
	prompt := randSeq(r, 6, 23)
	comps := [][]int32{randSeq(r, 5, 23), randSeq(r, 1, 23), randSeq(r, 9, 23)}
	var shared, whole Batch
	shared.Add(randSeq(r, 4, 23), 0) // a sequence of its own before the group
	whole.Add(shared.Tokens, 0)
	shared.Add(prompt[:len(prompt)-1], len(prompt)) // context only
	for _, c := range comps {
		// The last prompt token opens each continuation: its row scores the first completion token.
		shared.AddContinuation(append([]int32{prompt[len(prompt)-1]}, c...), 0)
		whole.Add(append(append([]int32{}, prompt...), c...), len(prompt)-1)
	}
	w := make([]float32, len(whole.Rows))
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	if len(shared.Rows) != len(whole.Rows) {
		t.Fatalf("%d scored rows shared, %d whole", len(shared.Rows), len(whole.Rows))
	}
	for i := range whole.Targets {
		if shared.Targets[i] != whole.Targets[i] {
			t.Fatalf("target %d: %d shared, %d whole", i, shared.Targets[i], whole.Targets[i])
		}
	}
	run := func(b *Batch, fused bool) (Output, []float32) {
		m := newTestModel(t, testConfig, 14)
		m.ZeroGrads()
		var out Output
		if fused {
			if err := m.ForwardBackward(b, 0.9, true, func(lo int, _, _, dl, _ []float32) { copy(dl, w[lo:]) }, &out); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := m.Forward(b, 0.9, true, &out); err != nil {
				t.Fatal(err)
			}
			if err := m.Backward(w, nil); err != nil {
				t.Fatal(err)
			}
		}
		return out, m.GradsHost()
	}
	for _, fused := range []bool{false, true} {
		os, gs := run(&shared, fused)
		ow, gw := run(&whole, fused)
		if i := firstBitDiff(os.LogP, ow.LogP); i >= 0 {
			t.Errorf("fused %v: logp[%d] differs: %v shared, %v whole", fused, i, os.LogP[i], ow.LogP[i])
		}
		if i := firstBitDiff(os.Entropy, ow.Entropy); i >= 0 {
			t.Errorf("fused %v: entropy[%d] differs: %v shared, %v whole", fused, i, os.Entropy[i], ow.Entropy[i])
		}
		if d := maxRel(gs, gw); d > 1e-5 {
			t.Errorf("fused %v: gradients differ by %.2g of the largest", fused, d)
		}
	}
	if len(shared.Tokens) != len(whole.Tokens)-(len(comps)-1)*(len(prompt)-1) {
		t.Errorf("shared batch has %d tokens", len(shared.Tokens))
	}
}

// TestPackingInvariance is DESIGN §6.1 in the model: a sequence's log-probabilities and
// entropies are the same bits alone and packed with other sequences of different lengths,
// before or after it (more than 96 rows in all), with a group continuing a shared prompt
// beside it, the LM head in chunks of any size, on 1, 2 or 3 threads.
func TestPackingInvariance(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	seq := randSeq(r, 11, 23)
	var alone Batch
	alone.Add(seq, 0)
	var want Output
	m := newTestModel(t, testConfig, 4)
	if !m.BatchInvariant() {
		t.Fatal("the CPU backend does not say it is batch-invariant")
	}
	if err := m.Forward(&alone, 1, true, &want); err != nil {
		t.Fatal(err)
	}
	var packed Batch
	packed.Add(randSeq(r, 3, 23), 0)
	packed.Add(randSeq(r, 16, 23), 0)
	packed.Add(randSeq(r, 4, 23), 4)
	packed.AddContinuation(randSeq(r, 6, 23), 0)
	packed.AddContinuation(randSeq(r, 2, 23), 1)
	first := len(packed.Rows)
	packed.Add(seq, 0)
	packed.Add(randSeq(r, 5, 23), 0)
	for range 6 { // past 96 rows, where products once changed kernel
		packed.Add(randSeq(r, 15, 23), 0)
	}
	for _, threads := range []int{1, 2, 3} {
		m, err := New(cpu.New(threads), testConfig, testParams(testConfig, 4))
		if err != nil {
			t.Fatal(err)
		}
		for _, headRows := range []int{0, 1, 4, 7} {
			m.HeadRows = headRows
			var got Output
			if err := m.Forward(&packed, 1, true, &got); err != nil {
				t.Fatal(err)
			}
			if i := firstBitDiff(got.LogP[first:first+len(want.LogP)], want.LogP); i >= 0 {
				t.Fatalf("%d threads, head chunks of %d: row %d: logp alone %g, packed %g", threads, headRows, i, want.LogP[i], got.LogP[first+i])
			}
			if i := firstBitDiff(got.Entropy[first:first+len(want.Entropy)], want.Entropy); i >= 0 {
				t.Fatalf("%d threads, head chunks of %d: row %d: entropy alone %g, packed %g", threads, headRows, i, want.Entropy[i], got.Entropy[first+i])
			}
		}
	}
}

// TestDecodeMatchesForward: KV-cache prefill + incremental decode produce, position by
// position, the logits of the full forward bit for bit (DESIGN §6.1), for several sequences
// of different lengths decoded together in one batch, one of them also continuing in a
// second slot from a copy of its prefill — or from its prefill shared (ShareSlot). Steps
// alternate between Decode and DecodeLogits.
func TestDecodeMatchesForward(t *testing.T) {
	for _, share := range []bool{false, true} {
		t.Run(map[bool]string{false: "copied prefill", true: "shared prefill"}[share], func(t *testing.T) { decodeMatchesForward(t, share) })
	}
}

func decodeMatchesForward(t *testing.T, share bool) {
	m := newTestModel(t, testConfig, 7)
	r := rand.New(rand.NewPCG(8, 9))
	seqs := [][]int32{randSeq(r, 12, 23), randSeq(r, 7, 23), randSeq(r, 15, 23)}
	prompt := []int{3, 5, 1}

	full := make([][]float32, len(seqs)) // full-forward logits, (len, V)
	for i, s := range seqs {
		var b Batch
		b.Add(s, 0)
		b.Rows, b.Targets = nil, nil
		for p := range s {
			b.Rows = append(b.Rows, int32(p))
			b.Targets = append(b.Targets, 0)
		}
		if err := m.Forward(&b, 1, false, &Output{}); err != nil {
			t.Fatal(err)
		}
		full[i] = m.Logits()
	}
	kv, err := m.NewKVCache(4, 16)
	if err != nil {
		t.Fatal(err)
	}
	var pb Batch
	slots := []int32{2, 0, 3}
	for i, s := range seqs {
		pb.Add(s[:prompt[i]], prompt[i])
	}
	d, err := m.Prefill(kv, &pb, slots, 1)
	if err != nil {
		t.Fatal(err)
	}
	v := testConfig.VocabSize
	check := func(i, pos int, got []float32) {
		t.Helper()
		if k := firstBitDiff(got, full[i][pos*v:(pos+1)*v]); k >= 0 {
			t.Fatalf("sequence %d position %d: decode logit %d %g, forward %g", i, pos, k, got[k], full[i][pos*v+k])
		}
	}
	for i := range seqs {
		check(i, prompt[i]-1, d.Logits[i*v:(i+1)*v])
	}
	// Sequence 0 also continues in slot 1 from a copy of its prefill, or sharing it.
	if share {
		if err := m.ShareSlot(kv, 1, 2, prompt[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Decode(kv, []int32{1}, []int32{1}, []int32{int32(prompt[0] - 1)}, 1); err == nil {
			t.Fatal("Decode into a shared position: no error")
		}
	} else {
		m.CopySlot(kv, 1, 2, prompt[0])
	}
	if _, err := m.DecodeLogits(kv, []int32{1}, []int32{0, 1}, []int32{5}); err == nil {
		t.Fatal("DecodeLogits with 1 token and 2 slots: no error")
	}
	pos := append([]int(nil), prompt...)
	for step := 0; ; step++ {
		var tok, sl, ps []int32
		var who []int
		for i, s := range seqs {
			if pos[i] < len(s) {
				tok, sl, ps = append(tok, s[pos[i]]), append(sl, slots[i]), append(ps, int32(pos[i]))
				who = append(who, i)
			}
		}
		if pos[0] < len(seqs[0]) {
			tok, sl, ps = append(tok, seqs[0][pos[0]]), append(sl, 1), append(ps, int32(pos[0]))
			who = append(who, 0)
		}
		if len(tok) == 0 {
			break
		}
		var logits []float32
		if step%2 == 1 {
			logits, err = m.DecodeLogits(kv, tok, sl, ps)
		} else {
			var out Dist
			out, err = m.Decode(kv, tok, sl, ps, 1)
			logits = out.Logits
		}
		if err != nil {
			t.Fatal(err)
		}
		for k, i := range who {
			check(i, int(ps[k]), logits[k*v:(k+1)*v])
		}
		for _, i := range who[:len(who)-boolInt(pos[0] < len(seqs[0]))] {
			pos[i]++
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestDeterminism: the same forward and backward twice give bit-identical results.
func TestDeterminism(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	var b Batch
	b.Add(randSeq(r, 13, 23), 0)
	b.Add(randSeq(r, 6, 23), 2)
	w := make([]float32, len(b.Rows))
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	run := func() ([]float32, []float32) {
		m := newTestModel(t, testConfig, 12)
		var out Output
		if err := m.Forward(&b, 0.7, true, &out); err != nil {
			t.Fatal(err)
		}
		m.ZeroGrads()
		if err := m.Backward(w, nil); err != nil {
			t.Fatal(err)
		}
		return out.LogP, m.GradsHost()
	}
	lp1, g1 := run()
	lp2, g2 := run()
	for i := range lp1 {
		if math.Float32bits(lp1[i]) != math.Float32bits(lp2[i]) {
			t.Fatalf("logp[%d] differs between runs", i)
		}
	}
	for i := range g1 {
		if math.Float32bits(g1[i]) != math.Float32bits(g2[i]) {
			t.Fatalf("grad[%d] differs between runs", i)
		}
	}
}

func TestBatchValidation(t *testing.T) {
	cases := []struct {
		name string
		b    Batch
	}{
		{"token outside vocabulary", Batch{Tokens: []int32{1, 23}, Lens: []int32{2}}},
		{"lengths do not add up", Batch{Tokens: []int32{1, 2, 3}, Lens: []int32{2}}},
		{"sequence longer than context", Batch{Tokens: make([]int32, 17), Lens: []int32{17}}},
		{"empty sequence", Batch{Tokens: []int32{1}, Lens: []int32{1, 0}}},
		{"row outside batch", Batch{Tokens: []int32{1, 2}, Lens: []int32{2}, Rows: []int32{2}, Targets: []int32{0}}},
		{"rows not increasing", Batch{Tokens: []int32{1, 2}, Lens: []int32{2}, Rows: []int32{1, 0}, Targets: []int32{0, 0}}},
		{"target outside vocabulary", Batch{Tokens: []int32{1, 2}, Lens: []int32{2}, Rows: []int32{0}, Targets: []int32{-1}}},
		{"continuation of a continuation", Batch{Tokens: []int32{1, 2, 3}, Lens: []int32{1, 1, 1}, Prefix: []int32{-1, 0, 1}}},
		{"continuation apart from its prefix", Batch{Tokens: []int32{1, 2, 3}, Lens: []int32{1, 1, 1}, Prefix: []int32{-1, -1, 0}}},
		{"continuation first", Batch{Tokens: []int32{1}, Lens: []int32{1}, Prefix: []int32{0}}},
		{"prefix and continuation longer than context", Batch{Tokens: make([]int32, 20), Lens: []int32{10, 10}, Prefix: []int32{-1, 0}}},
		{"prefixes for some sequences", Batch{Tokens: []int32{1, 2}, Lens: []int32{1, 1}, Prefix: []int32{-1}}},
	}
	for _, c := range cases {
		if err := c.b.Validate(testConfig); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	m := newTestModel(t, testConfig, 1)
	if err := m.Backward([]float32{1}, nil); err == nil {
		t.Error("Backward without Forward: no error")
	}
}
