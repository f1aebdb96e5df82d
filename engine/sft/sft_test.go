package sft

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/gpt2/gpt2test"
	"github.com/rookscript/rookscript/engine/optim"
)

// tiny is the tests' tiny model with a vocabulary of 31 and a context of 32.
var tiny = func() gpt2.Config {
	c := gpt2test.Tiny()
	c.VocabSize, c.MaxSeqLen = 31, 32
	return c
}()

// TestLearnsASequence: a tiny model memorises a deterministic pattern; its loss falls far
// below the uniform log(V).
func TestLearnsASequence(t *testing.T) {
	m := gpt2test.Random(t, cpu.New(2), tiny, 1, 1)
	opt, _ := optim.NewAdamW(m, optim.AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8})
	r := rand.New(rand.NewPCG(2, 2))
	var docs []Doc
	for range 8 {
		start := r.IntN(10)
		d := Doc{ScoreFrom: 2}
		for k := range 20 {
			d.Tokens = append(d.Tokens, int32((start+3*k)%31))
		}
		docs = append(docs, d)
	}
	first, _ := Loss(context.Background(), m, docs, 0)
	var last Metrics
	var err error
	for range 60 {
		if last, err = Step(context.Background(), m, opt, docs, Config{LR: 1e-2, MaxGradNorm: 1, MicroTokens: 50}); err != nil {
			t.Fatal(err)
		}
	}
	final, _ := Loss(context.Background(), m, docs, 0)
	t.Logf("loss %.3f → %.3f (uniform %.3f)", first, final, math.Log(31))
	if final > 0.3 || last["finite"] != 1 || last["tokens"] != 8*17 {
		t.Fatalf("loss %.3f → %.3f, metrics %v", first, final, last)
	}
}

// TestMicroBatchingKeepsTheGradient: splitting into micro-batches only changes summation
// order.
func TestMicroBatchingKeepsTheGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	var docs []Doc
	for i := range 5 {
		d := Doc{ScoreFrom: i % 3}
		for range 6 + i {
			d.Tokens = append(d.Tokens, int32(r.IntN(31)))
		}
		docs = append(docs, d)
	}
	grads := func(micro int) []float32 {
		m := gpt2test.Random(t, cpu.New(2), tiny, 4, 1)
		opt, _ := optim.NewAdamW(m, optim.DefaultAdamW())
		if _, err := Step(context.Background(), m, opt, docs, Config{LR: 0, MicroTokens: micro}); err != nil {
			t.Fatal(err)
		}
		return m.GradsHost()
	}
	a, b := grads(0), grads(12)
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-6 {
			t.Fatalf("gradient %d: %g whole, %g micro-batched", i, a[i], b[i])
		}
	}
}

// counting is a CPU backend that records its largest allocation.
type counting struct {
	*cpu.CPU
	largest int
}

func (c *counting) Alloc(n int) backend.Buf {
	c.largest = max(c.largest, n)
	return c.CPU.Alloc(n)
}

// TestStepHoldsOneLogitsChunk: a step over 600 scored tokens of GPT-2's vocabulary holds one
// chunk of LM-head logits, never 600 × 50257 floats (120 MB), and Loss the same.
func TestStepHoldsOneLogitsChunk(t *testing.T) {
	cfg := gpt2.Config{VocabSize: 50257, MaxSeqLen: 64, NumLayers: 1, NumHeads: 2, Channels: 8, LayerNormE: 1e-5}
	be := &counting{CPU: cpu.New(2)}
	m, err := gpt2.New(be, cfg, gpt2.RandomParams(cfg, 1))
	if err != nil {
		t.Fatal(err)
	}
	opt, _ := optim.NewAdamW(m, optim.DefaultAdamW())
	r := rand.New(rand.NewPCG(3, 3))
	var docs []Doc
	for range 10 {
		d := Doc{ScoreFrom: 3}
		for range 64 {
			d.Tokens = append(d.Tokens, int32(r.IntN(cfg.VocabSize)))
		}
		docs = append(docs, d)
	}
	m0, err := Step(context.Background(), m, opt, docs, Config{LR: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Loss(context.Background(), m, docs, 0); err != nil {
		t.Fatal(err)
	}
	chunk := gpt2.HeadChunkBytes / 4
	if rows := int(m0["tokens"]); be.largest > chunk || rows*cfg.VocabSize <= chunk {
		t.Fatalf("largest allocation %d floats: one chunk of logits is at most %d, the batch's %d rows × V %d",
			be.largest, chunk, rows, rows*cfg.VocabSize)
	}
}
