package paritytest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/optim"
)

// modelConfig is a small GPT-2 with nothing a multiple of a block size: head size 12,
// vocabulary 67, 36 channels.
var modelConfig = gpt2.Config{VocabSize: 67, MaxSeqLen: 48, NumLayers: 2, NumHeads: 3, Channels: 36, LayerNormE: 1e-5}

// modelParams starts from gpt2.RandomParams and moves every tensor (LayerNorm gains and
// biases included) away from its initial value, so that every gradient term matters.
func modelParams(seed uint64) []float32 {
	p := gpt2.RandomParams(modelConfig, seed)
	r := rand.New(rand.NewPCG(seed, 5))
	for i := range p {
		p[i] += float32(0.05 * r.NormFloat64())
	}
	return p
}

// models returns the same model on the device and on the CPU. The device runs its LM head in
// chunks of 5 scored rows, the CPU in one: the chunking is the model's, over the backend's
// kernels, and must not change the numbers.
func (s Suite) models(t *testing.T, seed uint64) (dev, ref *gpt2.Model) {
	t.Helper()
	return s.modelsOf(t, modelParams(seed))
}

// modelsOf is models with parameters p.
func (s Suite) modelsOf(t *testing.T, p []float32) (dev, ref *gpt2.Model) {
	t.Helper()
	dev, err := gpt2.New(s.Dev, modelConfig, p)
	if err != nil {
		t.Fatal(err)
	}
	dev.HeadRows = 5
	ref, err = gpt2.New(s.Ref, modelConfig, p)
	if err != nil {
		t.Fatal(err)
	}
	return dev, ref
}

// packedBatch holds sequences of lengths 1, 7, 21 and 5, scored from position 0, 3, 10 and 1
// (the prompt/completion split of a GRPO batch).
func packedBatch(r *rand.Rand) (b gpt2.Batch, seqOfRow []int) {
	for i, sz := range []struct{ n, from int }{{1, 0}, {7, 3}, {21, 10}, {5, 1}} {
		seq := make([]int32, sz.n)
		for k := range seq {
			seq[k] = int32(r.IntN(modelConfig.VocabSize))
		}
		before := len(b.Rows)
		b.Add(seq, sz.from)
		for range len(b.Rows) - before {
			seqOfRow = append(seqOfRow, i)
		}
	}
	return b, seqOfRow
}

func forward(t *testing.T, m *gpt2.Model, b *gpt2.Batch, temp float32) gpt2.Output {
	t.Helper()
	var out gpt2.Output
	if err := m.Forward(b, temp, true, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func backward(t *testing.T, m *gpt2.Model, dlogp, dent []float32) {
	t.Helper()
	m.ZeroGrads()
	if err := m.Backward(dlogp, dent); err != nil {
		t.Fatal(err)
	}
}

// compareGrads compares the gradients tensor by tensor, each relative to its largest element.
func compareGrads(t *testing.T, dev, ref *gpt2.Model) {
	t.Helper()
	gd, gr := dev.GradsHost(), ref.GradsHost()
	for _, tn := range ref.Layout.Tensors {
		compareScaled(t, "grad "+tn.Name, gd[tn.Off:tn.Off+tn.Size], gr[tn.Off:tn.Off+tn.Size], TolGrad)
	}
}

// GRPOStep: a full forward and backward of a packed batch, then one policy-gradient update
// as the GRPO trainer makes it. Forward at temperature 0.9 with entropies: log-probabilities,
// entropies and logits. Backward with per-row weights −A_i/|o_i|/G over each completion's
// tokens plus an entropy bonus: every parameter's gradient. Then gradient norms, clipping,
// AdamW, and the updated policy's log-probabilities.
func (s Suite) GRPOStep(t *testing.T) {
	dev, ref := s.models(t, 22)
	r := rand.New(rand.NewPCG(22, 1))
	b, seqOfRow := packedBatch(r)
	const temp = 0.9
	od, or := forward(t, dev, &b, temp), forward(t, ref, &b, temp)
	compare(t, "logp", od.LogP, or.LogP, TolModel)
	compare(t, "entropy", od.Entropy, or.Entropy, TolModel)
	compare(t, "logits", dev.Logits(), ref.Logits(), TolModel)
	adv := []float64{0.5, -1.2, 0.9, -0.2}
	count := make([]int, len(adv))
	for _, sq := range seqOfRow {
		count[sq]++
	}
	dlogp, dent := make([]float32, len(b.Rows)), make([]float32, len(b.Rows))
	for i, sq := range seqOfRow {
		dlogp[i] = float32(-adv[sq] / float64(count[sq]) / float64(len(adv)))
		dent[i] = float32(-0.01 / float64(len(b.Rows)))
	}
	backward(t, dev, dlogp, dent)
	backward(t, ref, dlogp, dent)
	compareGrads(t, dev, ref)

	nd, nr := optim.Norms(dev), optim.Norms(ref)
	if math.Abs(nd.Total-nr.Total) > 1e-4*nr.Total {
		t.Fatalf("gradient norm %.9g, CPU %.9g", nd.Total, nr.Total)
	}
	for i := range nr.Layers {
		if math.Abs(nd.Layers[i]-nr.Layers[i]) > 1e-4*nr.Layers[i] {
			t.Errorf("layer %d gradient norm %.9g, CPU %.9g", i, nd.Layers[i], nr.Layers[i])
		}
	}
	// Clip to half the norm so that the Scale kernel runs; both use the CPU's norm so the
	// factor is the same.
	optim.Clip(dev, nr.Total, nr.Total/2)
	optim.Clip(ref, nr.Total, nr.Total/2)
	compareGrads(t, dev, ref)

	cfg := optim.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}
	before := ref.ParamsHost()
	gref := ref.GradsHost()
	for _, m := range []*gpt2.Model{dev, ref} {
		o, err := optim.NewAdamW(m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		o.Step(cfg.LR)
	}
	compareAdamMoves(t, dev, ref, before, gref, cfg.LR)
	od, or = forward(t, dev, &b, temp), forward(t, ref, &b, temp)
	compare(t, "logp after the update", od.LogP, or.LogP, TolModel)
}

// FusedHead: ForwardBackward on the device (each chunk of 5 rows of logits turned into its
// gradient while in memory) against Forward + Backward on the CPU (one chunk), on a batch with
// a prompt shared by three continuations: the same log-probabilities, entropies and
// gradients; and the device's Score gives the forward's numbers.
func (s Suite) FusedHead(t *testing.T) {
	dev, ref := s.models(t, 24)
	r := rand.New(rand.NewPCG(24, 1))
	b, _ := packedBatch(r)
	// A GRPO group: a prompt of 9 tokens packed once, three completions continuing it.
	seq := func(n int) []int32 {
		x := make([]int32, n)
		for k := range x {
			x[k] = int32(r.IntN(modelConfig.VocabSize))
		}
		return x
	}
	b.Add(seq(8), 8)
	for _, l := range []int{6, 1, 12} {
		b.AddContinuation(seq(l), 0)
	}
	const temp = 1.1
	dlogp, dent := make([]float32, len(b.Rows)), make([]float32, len(b.Rows))
	for i := range dlogp {
		dlogp[i], dent[i] = float32(r.NormFloat64()/10), float32(r.NormFloat64()/100)
	}
	or := forward(t, ref, &b, temp)
	backward(t, ref, dlogp, dent)
	var od gpt2.Output
	dev.ZeroGrads()
	err := dev.ForwardBackward(&b, temp, true, func(lo int, _, _, dl, de []float32) {
		copy(dl, dlogp[lo:])
		copy(de, dent[lo:])
	}, &od)
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "logp", od.LogP, or.LogP, TolModel)
	compare(t, "entropy", od.Entropy, or.Entropy, TolModel)
	compareGrads(t, dev, ref)
	var sd gpt2.Output
	if err := dev.Score(&b, temp, true, &sd); err != nil {
		t.Fatal(err)
	}
	compare(t, "Score logp", sd.LogP, or.LogP, TolModel)
}

// Decode: a prefill of two prompts into cache slots 2 and 0, then four decode steps,
// compared with the CPU; and the log-probabilities recorded while decoding equal the
// training forward's on the same device (DESIGN invariant 2).
func (s Suite) Decode(t *testing.T) {
	dev, ref := s.models(t, 23)
	r := rand.New(rand.NewPCG(23, 1))
	const temp = 0.7
	prompts := [][]int32{make([]int32, 5), make([]int32, 9)}
	for _, p := range prompts {
		for k := range p {
			p[k] = int32(r.IntN(modelConfig.VocabSize))
		}
	}
	slots := []int32{2, 0}
	var pb gpt2.Batch
	for _, p := range prompts {
		pb.Add(p, len(p))
	}
	var kvs [2]*gpt2.KVCache
	var dists [2]gpt2.Dist
	for i, m := range []*gpt2.Model{dev, ref} {
		kv, err := m.NewKVCache(3, 20)
		if err != nil {
			t.Fatal(err)
		}
		kvs[i] = kv
		if dists[i], err = m.Prefill(kv, &pb, slots, temp); err != nil {
			t.Fatal(err)
		}
	}
	compareDist(t, "prefill", dists[0], dists[1])
	seqs := [][]int32{append([]int32(nil), prompts[0]...), append([]int32(nil), prompts[1]...)}
	var recorded [2][]float32
	for step := range 4 {
		// Both backends feed the same tokens: drawn from the CPU's distribution.
		toks, pos := make([]int32, 2), make([]int32, 2)
		for i := range seqs {
			toks[i] = sample(r, dists[1].Probs[i*modelConfig.VocabSize:(i+1)*modelConfig.VocabSize])
			recorded[i] = append(recorded[i], dists[0].LogProb(i, toks[i], temp))
			pos[i] = int32(len(seqs[i]))
			seqs[i] = append(seqs[i], toks[i])
		}
		for i, m := range []*gpt2.Model{dev, ref} {
			var err error
			if dists[i], err = m.Decode(kvs[i], toks, slots, pos, temp); err != nil {
				t.Fatal(err)
			}
		}
		compareDist(t, name("decode step %d", step), dists[0], dists[1])
	}
	// The training forward on the device over prompt + completion, scoring the completion.
	var tb gpt2.Batch
	for i, sq := range seqs {
		tb.Add(sq, len(prompts[i])-1)
	}
	out := forward(t, dev, &tb, temp)
	var want []float32
	for i := range seqs {
		want = append(want, recorded[i]...)
	}
	compare(t, "decode logprob vs training forward", want, out.LogP, Tol{Abs: TolDecode})
}

// compareAdamMoves compares the parameter moves of a first AdamW step from before, taken
// with the CPU's gradient gref. Such a step moves each parameter by about lr·sign(g):
// compare the moves in units of lr. Where the gradient is at rounding level its sign is
// arbitrary, so there only the bound |move| ≤ lr(1 + wd) is checked.
func compareAdamMoves(t *testing.T, dev, ref *gpt2.Model, before, gref []float32, lr float64) {
	t.Helper()
	pd, pr := dev.ParamsHost(), ref.ParamsHost()
	for _, tn := range ref.Layout.Tensors {
		gmax := 0.0
		for _, g := range gref[tn.Off : tn.Off+tn.Size] {
			gmax = max(gmax, math.Abs(float64(g)))
		}
		worst := 0.0
		for i := tn.Off; i < tn.Off+tn.Size; i++ {
			md, mr := float64(pd[i]-before[i])/lr, float64(pr[i]-before[i])/lr
			if math.Abs(float64(gref[i])) < 1e-3*gmax {
				if math.Abs(md) > 1.5 {
					t.Fatalf("%s[%d]: moved %.3g lr", tn.Name, i-tn.Off, md)
				}
				continue
			}
			worst = max(worst, math.Abs(md-mr))
		}
		if worst > TolAdamLRs {
			t.Errorf("%s: AdamW moves differ by %.3g lr", tn.Name, worst)
		}
	}
}

func compareDist(t *testing.T, what string, got, want gpt2.Dist) {
	t.Helper()
	compare(t, what+" logits", got.Logits, want.Logits, TolModel)
	compare(t, what+" probs", got.Probs, want.Probs, TolModel)
	compare(t, what+" lse", got.LSE, want.LSE, TolModel)
}

func sample(r *rand.Rand, p []float32) int32 {
	u := r.Float32()
	for k, pk := range p {
		u -= pk
		if u <= 0 {
			return int32(k)
		}
	}
	return int32(len(p) - 1)
}
