package gpt2_test

import (
	"fmt"
	"math/rand/v2"
	"syscall"
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
	c0 := processCPU()
	for b.Loop() {
		if err := m.Forward(bt, 1, false, &out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((processCPU()-c0)*1e3/float64(b.N), "cpu-ms/op")
}

// BenchmarkTrainStep124M: a training step at B=4, T=64 as sft.Step and the GRPO update take
// one: ZeroGrads, ForwardBackward of the mean cross-entropy, AdamW.
func BenchmarkTrainStep124M(b *testing.B) {
	m := benchModel(b, gpt2.RookWorld124M)
	opt, err := optim.NewAdamW(m, optim.DefaultAdamW())
	if err != nil {
		b.Fatal(err)
	}
	bt, w := trainBatch(4, 64)
	grad := func(lo int, _, _, dlogp, _ []float32) { copy(dlogp, w[lo:]) }
	var out gpt2.Output
	step := func() {
		m.ZeroGrads()
		if err := m.ForwardBackward(bt, 1, false, grad, &out); err != nil {
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

// BenchmarkDecode124M: one decode step of 64 rows (8 prompts of 80 tokens, 8 slots each,
// about 32 tokens decoded) and of 8 rows (one slot each), the logits of every row: the
// rollout's inner loop.
func BenchmarkDecode124M(b *testing.B) {
	const prompts, plen, done = 8, 80, 32
	m := benchModel(b, gpt2.RookWorld124M)
	for _, group := range []int{8, 1} {
		b.Run(fmt.Sprintf("rows=%d", prompts*group), func(b *testing.B) {
			kv, err := m.NewKVCache(prompts*group, plen+done+1)
			if err != nil {
				b.Fatal(err)
			}
			r := rand.New(rand.NewPCG(3, 3))
			var pb gpt2.Batch
			var pslots []int32
			for p := range prompts {
				s := make([]int32, plen)
				for i := range s {
					s[i] = int32(r.IntN(50257))
				}
				pb.Add(s, len(s))
				pslots = append(pslots, int32(p*group))
			}
			if _, err := m.Prefill(kv, &pb, pslots, 1); err != nil {
				b.Fatal(err)
			}
			tokens, slots, pos := make([]int32, prompts*group), make([]int32, prompts*group), make([]int32, prompts*group)
			for s := range slots {
				if s%group != 0 {
					if err := m.ShareSlot(kv, s, s/group*group, plen); err != nil {
						b.Fatal(err)
					}
				}
				slots[s] = int32(s)
			}
			for step := range done {
				for s := range pos {
					tokens[s], pos[s] = int32(r.IntN(50257)), int32(plen+step)
				}
				if _, err := m.Decode(kv, tokens, slots, pos, 1); err != nil {
					b.Fatal(err)
				}
			}
			for s := range pos {
				pos[s] = int32(plen + done)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Decode(kv, tokens, slots, pos, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScoreGroups124M: a reference model's Score of one GRPO micro-batch as the update
// packs it — 2 prompts of 80 tokens, each continued by 8 completions of 64 — every completion
// token scored; also in CPU milliseconds of the process per op (steadier than wall time on a
// shared machine).
func BenchmarkScoreGroups124M(b *testing.B) {
	m := benchModel(b, gpt2.RookWorld124M)
	r := rand.New(rand.NewPCG(3, 3))
	var bt gpt2.Batch
	for range 2 {
		p := make([]int32, 80)
		for i := range p {
			p[i] = int32(r.IntN(50257))
		}
		bt.Add(p[:79], 80)
		for range 8 {
			c := make([]int32, 64)
			for i := range c {
				c[i] = int32(r.IntN(50257))
			}
			bt.AddContinuation(append([]int32{p[79]}, c...), 0)
		}
	}
	var out gpt2.Output
	if err := m.Score(&bt, 1, false, &out); err != nil {
		b.Fatal(err)
	}
	c0 := processCPU()
	for b.Loop() {
		if err := m.Score(&bt, 1, false, &out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((processCPU()-c0)*1e3/float64(b.N), "cpu-ms/op")
}

// processCPU is this process's CPU time, all threads, in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
