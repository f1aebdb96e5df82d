package gpt2_test

import (
	"math/rand/v2"
	"testing"

	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/optim"
)

func benchModel(b *testing.B, cfg gpt2.Config) *gpt2.Model {
	r := rand.New(rand.NewPCG(1, 1))
	l := gpt2.NewLayout(cfg)
	p := make([]float32, l.Total)
	for i := range p {
		p[i] = float32(r.NormFloat64() * 0.02)
	}
	m, err := gpt2.New(cpu.New(0), cfg, p)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// trainBatch is B sequences of T tokens, every position scored (next-token cross-entropy).
func trainBatch(bsz, t int) (*gpt2.Batch, []float32) {
	r := rand.New(rand.NewPCG(2, 2))
	var bt gpt2.Batch
	for range bsz {
		s := make([]int32, t+1)
		for i := range s {
			s[i] = int32(r.IntN(50257))
		}
		bt.Add(s[:t], 0)
		bt.Rows = append(bt.Rows, int32(len(bt.Tokens)-1))
		bt.Targets = append(bt.Targets, s[t])
	}
	w := make([]float32, len(bt.Rows))
	for i := range w {
		w[i] = -1 / float32(len(w))
	}
	return &bt, w
}

// BenchmarkForward124M: GPT-2 124M forward at B=4, T=64 with the LM head on every row.
func BenchmarkForward124M(b *testing.B) {
	m := benchModel(b, gpt2.RookWorld124M)
	bt, _ := trainBatch(4, 64)
	var out gpt2.Output
	m.Forward(bt, 1, false, &out)
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Forward(bt, 1, false, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTrainStep124M: forward + backward + AdamW at B=4, T=64.
func BenchmarkTrainStep124M(b *testing.B) {
	m := benchModel(b, gpt2.RookWorld124M)
	opt, err := optim.NewAdamW(m, optim.DefaultAdamW())
	if err != nil {
		b.Fatal(err)
	}
	bt, w := trainBatch(4, 64)
	var out gpt2.Output
	step := func() {
		if err := m.Forward(bt, 1, false, &out); err != nil {
			b.Fatal(err)
		}
		m.ZeroGrads()
		if err := m.Backward(w, nil); err != nil {
			b.Fatal(err)
		}
		opt.Step(1e-4)
	}
	step()
	b.ReportAllocs()
	for b.Loop() {
		step()
	}
}
