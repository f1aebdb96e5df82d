package main

import (
	"math"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/rollout"
)

// Every workload has one floor: per phase, its weight products' FLOPs at the GEMM rate or the
// bytes it must read beyond what the last-level cache keeps at the memory bandwidth, whichever
// takes longer (a phase can stream while it computes, so the two overlap at best); the phases
// one after another (each needs the one before). The rate is the fastest product kernel the
// engine's backend runs (its MatMul, or the vendor's SGEMM), and both rates are the best
// sampled in the section's own rounds, so that a floor and its workload meet the same machine.
// Attention's FLOPs are not counted: they are not products at the GEMM rate. Every term is a
// lower bound, so a workload faster than its floor is a bench bug.

// phase is part of a workload: its products' FLOPs and the bytes it reads from memory.
type phase struct{ flop, bytes float64 }

// rates are a section's floor rates: GFLOP/s, GB/s, and the bytes the last-level cache keeps.
type rates struct{ gflops, gbps, llc float64 }

// ms is the floor of phases, NaN where a rate it needs was not measured.
func (r rates) ms(ps ...phase) float64 {
	var s float64
	for _, p := range ps {
		t, bytes := 0.0, max(0, p.bytes-r.llc)
		if p.flop > 0 {
			t = p.flop / r.gflops / 1e6
		}
		if bytes > 0 {
			t = max(t, bytes/r.gbps/1e6)
		}
		s += t
	}
	return s
}

// weights a row's products multiply: 12·C² a layer, and V·C in the LM head.
func weights(cfg gpt2.Config, head bool) float64 {
	w := 12 * float64(cfg.NumLayers*cfg.Channels*cfg.Channels)
	if head {
		w += float64(cfg.VocabSize * cfg.Channels)
	}
	return w
}

// decodeWork is a decode step of rows rows: the products, reading every weight once, then
// attention, reading the keys and values of cached positions.
func decodeWork(cfg gpt2.Config, rows int, cached float64) []phase {
	w := weights(cfg, true)
	return []phase{
		{flop: 2 * w * float64(rows), bytes: 4 * w},
		{bytes: cached * 8 * float64(cfg.NumLayers*cfg.Channels)},
	}
}

// grpoWork is what a GRPO step must compute: the rollout's prefill, then each decode step's
// products (every live row through every weight) and attention (each prompt's cached
// positions once, each row's own); and a forward over the packed batch (each group's prompt
// but its last token once, each completion from that token, scored). The reference runs one
// such forward, the update three (forward and backward).
func grpoWork(cfg gpt2.Config, b *rollout.Batch) (roll []phase, forward phase) {
	block, head, longest := weights(cfg, false), weights(cfg, true)-weights(cfg, false), 0
	roll = []phase{{}}
	for _, p := range b.Prompts {
		roll[0].flop += 2 * (block*float64(len(p)) + head)
		forward.flop += 2 * block * float64(len(p)-1)
	}
	for _, c := range b.Completions {
		longest = max(longest, len(c.Tokens))
		forward.flop += 2 * (block + head) * float64(len(c.Tokens))
	}
	for step := 1; step < longest; step++ {
		var rows, cached float64
		live := map[int]bool{}
		for _, c := range b.Completions {
			if len(c.Tokens) > step {
				rows, cached = rows+1, cached+float64(step)
				if !live[c.Prompt] {
					live[c.Prompt], cached = true, cached+float64(len(b.Prompts[c.Prompt]))
				}
			}
		}
		roll = append(roll, decodeWork(cfg, int(rows), cached)...)
	}
	return roll, forward
}

// measure alternates a section's contenders with the floor rates' samplers, repeat times a
// round each, and returns the section's floor rates (the best of each sampled), their rows
// added under group.
func (b *bench) measure(group, key string, runs, repeat int, cs ...*contender) rates {
	r := rates{gflops: math.NaN(), gbps: math.NaN()}
	if b.device == "cpu" { // a GPU's L2 keeps a small part of the weights: not counted
		r.llc = float64(lastLevelCache())
	}
	best, err := b.fastest()
	if err != nil {
		b.failure("floor rates", err)
		return r
	}
	rc, mc := sampling(best, repeat), sampling(b.memSampler(), repeat)
	alternate(key, b.warmup, runs, append(cs, rc, mc)...)
	for _, x := range []struct {
		c          *contender
		rate       *float64
		what, unit string
	}{{rc, &r.gflops, "rate", "GFLOP/s"}, {mc, &r.gbps, "bandwidth", "GB/s"}} {
		s := x.c.series(rate)
		*x.rate = s.best(true)
		b.add(valueRow(group, "floor."+key+"_"+x.what, "  floor "+x.what+" in these rounds: "+x.c.name, x.unit, s))
	}
	return r
}

// measureKernels times the floors' candidate products, samples alternated, and keeps the
// fastest median's as the floors' rate: MatMul and OpenBLAS (the backend's family) at the MLP's
// two products over 768 rows; on a GPU MatMul and cuBLAS at the MLP's product over a GRPO
// minibatch and at a large square, nearest cuBLAS's peak. Each sample's key is kernel_shape.
func (b *bench) measureKernels(runs int) ([]*contender, []string, error) {
	be, err := b.backend()
	if err != nil {
		return nil, nil, err
	}
	type shape struct {
		key      string
		n, c, oc int
	}
	kernels, shapes := []string{"matmul", "openblas"}, []shape{{"fc", 768, 768, 3072}, {"proj", 768, 3072, 768}}
	if b.device != "cpu" {
		kernels = []string{"matmul", "cublas"}
		shapes = []shape{{"model", 16 * 144, 768, 3072}, {"square", 8192, 8192, 8192}}
	}
	var cs []*contender
	var ss []sampler
	var keys []string
	for _, sh := range shapes {
		for _, k := range kernels {
			ss, keys = append(ss, gemmSampler(be, k, sh.n, sh.c, sh.oc)), append(keys, k+"_"+sh.key)
			cs = append(cs, sampling(ss[len(ss)-1], 1))
		}
	}
	alternate("products", 0, runs, cs...)
	best := 0
	for i, c := range cs {
		if c.series(rate).median() > cs[best].series(rate).median() {
			best = i
		}
	}
	b.best = ss[best]
	return cs, keys, nil
}

// fastest is the floors' rate sampler, chosen by a short measurement where no gemm section ran.
func (b *bench) fastest() (sampler, error) {
	if b.best.sample == nil {
		progress("  choosing the floors' kernel: every kernel at every shape, 3 samples each")
		if _, _, err := b.measureKernels(3); err != nil {
			return sampler{}, err
		}
	}
	return b.best, nil
}

func (b *bench) memSampler() sampler {
	if b.mem.sample == nil && b.device == "cpu" {
		b.mem = memReader(b.threads)
	} else if b.mem.sample == nil {
		b.mem = devCopy(b.be)
	}
	return b.mem
}

func (b *bench) runGEMM() {
	progress("== products, memory bandwidth")
	cs, keys, err := b.measureKernels(b.runs)
	if err != nil {
		b.failure("gemm", err)
		return
	}
	group := "Products by each kernel the engine's backend runs (floors take the fastest), memory bandwidth"
	for i, c := range cs {
		b.add(valueRow(group, "gemm."+keys[i], c.name, "GFLOP/s", c.series(rate)))
	}
	mem := sampling(b.memSampler(), 1)
	alternate("bandwidth", 0, b.runs, mem)
	b.add(valueRow(group, "mem.bandwidth", mem.name, "GB/s", mem.series(rate)))
}
