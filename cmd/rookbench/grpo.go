package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
)

// One full GRPO step of GPT-2 124M at the rollout shapes (8 prompts × group 8, 80-token
// prompts, up to 64 new tokens), timed by phase from the step's own metrics: rollout
// (sampling with recorded logprobs), reference (the frozen model's forward, β > 0) and update
// (policy forward + backward over every completion token, clipping, AdamW). The reward is a
// fixed function of the sampled tokens, so the step has a signal without an engine.

type grpoPhases struct {
	rollout, reference, update, total, tokPerS series
	work                                       []grpoWork // per timed step
}

// grpoWork is what one GRPO step has to compute, for its floors: the rollout's prefill FLOPs;
// each decode step's weight products' FLOPs and the cached keys' and values' bytes its
// attention reads (the weights' bytes are weightBytes at every step); and the FLOPs of one
// forward over the packed training batch (each group's prompt once, as grpo packs it). The
// reference runs one forward, the update three (forward and backward).
type grpoWork struct {
	prefill       float64
	productFLOP   []float64
	attendedBytes []float64
	weightBytes   float64
	forward       float64
}

// countGRPO counts a step's work from its batch: L layers of width C, N parameters,
// vocabulary V; FLOPs as llm.c counts them (2 per multiply-add: 24·C²·L per token through the
// blocks, 4·C·L per token and attended position, 2·C·V per scored row through the head).
func countGRPO(cfg gpt2.Config, n int, b *rollout.Batch) grpoWork {
	L, C, V := float64(cfg.NumLayers), float64(cfg.Channels), float64(cfg.VocabSize)
	block := 24 * C * C * L // a token's products through the blocks
	token := func(pos int) float64 { return block + 4*C*L*float64(pos+1) }
	var w grpoWork
	longest := 0
	for _, c := range b.Completions {
		longest = max(longest, len(c.Tokens))
	}
	for _, p := range b.Prompts {
		for t := range p {
			w.prefill += token(t)
		}
		w.prefill += 2 * C * V
		// The forward packs the prompt but its last token once per group ...
		for t := range len(p) - 1 {
			w.forward += token(t)
		}
	}
	for _, c := range b.Completions {
		p := len(b.Prompts[c.Prompt])
		// ... and each completion from that last token, every row scored.
		for t := range len(c.Tokens) {
			w.forward += token(p-1+t) + 2*C*V
		}
	}
	// Decode step s feeds token s-1 of every completion longer than s: its products read
	// every weight, and its attention the cached keys and values of each prompt once (its
	// samples share them) and of each row's own tokens.
	for step := 1; step < longest; step++ {
		var flop, kv float64
		live := map[int]bool{}
		for _, c := range b.Completions {
			if len(c.Tokens) > step {
				flop += block + 2*C*V
				kv += 8 * C * L * float64(step)
				if !live[c.Prompt] {
					live[c.Prompt] = true
					kv += 8 * C * L * float64(len(b.Prompts[c.Prompt]))
				}
			}
		}
		w.productFLOP = append(w.productFLOP, flop)
		w.attendedBytes = append(w.attendedBytes, kv)
	}
	w.weightBytes = 4 * float64(n)
	return w
}

// grpoRuns caps the timed GRPO steps: one takes about 35 s on two cores. Three, so that the
// medians are a middle step's and one step slowed by the rest of the machine moves none of
// them; the median of two was their mean (runs here put the whole step at 1.04 to 1.23 times
// its floor, its two steps as far as 1.08 and 1.15 apart).
const grpoRuns = 3

func (b *bench) runGRPO() {
	progress("== GRPO step, %d×%d sequences, %d-token prompts, %d new tokens", genPrompts, genGroup, genPromptLen, genNew)
	runtime.GC()
	fail := func(err error) {
		why := err.Error()
		b.grpo = grpoPhases{skipped(why), skipped(why), skipped(why), skipped(why), skipped(why), nil}
		b.failure("grpo", err)
	}
	if err := b.loadModel(); err != nil {
		fail(err)
		return
	}
	ref, err := gpt2.New(b.model.B, b.model.Config, b.model.ParamsHost())
	if err != nil {
		fail(err)
		return
	}
	opt, err := optim.NewAdamW(b.model, optim.AdamWConfig{LR: 1e-6, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	if err != nil {
		fail(err)
		return
	}
	tr := &grpo.Trainer{Policy: b.model, Ref: ref, Opt: opt}
	sampler := rollout.NewSampler(b.model)
	prompts := genPromptTokens(b.model.Config.VocabSize)
	cfg := grpo.DefaultConfig()
	cfg.Beta, cfg.MicroBatch = 0.02, 16
	var roll, refT, upd, tot, tps []float64
	var work []grpoWork
	// The floors' rates are sampled before each step they bound (sectionFloors), in
	// alternate's rounds as every other section samples them.
	rate := &contender{name: "SGEMM floor rate", repeat: gen8Repeat}
	bw := &contender{name: "memory read bandwidth", repeat: gen8Repeat}
	if b.device == "cpu" {
		gs, bs := b.floorRateSampler(), b.floorBandwidthSampler()
		rate.run = func() (sample, error) { return gs.sample(), nil }
		bw.run = func() (sample, error) { return bs.sample(), nil }
	}
	i := 0 // the step: its sampling seed, and whether it is a warm-up step
	step := &contender{name: "step", run: func() (sample, error) {
		defer func() { i++ }()
		batch, err := sampler.Generate(context.Background(), prompts,
			rollout.Config{Group: genGroup, MaxNewTokens: genNew, Temperature: 1, Seed: uint64(100 + i)})
		if err != nil {
			return sample{}, err
		}
		batch.Rewards = make([]float64, len(batch.Completions))
		for k, c := range batch.Completions {
			for _, t := range c.Tokens {
				batch.Rewards[k] += float64(t%7) / float64(len(c.Tokens))
			}
		}
		m, err := tr.Step(context.Background(), batch, cfg)
		if err != nil {
			return sample{}, err
		}
		progress("  grpo step %d: rollout %.1f s, reference %.1f s, update %.1f s", i+1, m["time/rollout"], m["time/reference"], m["time/update"])
		if i >= b.warmup {
			roll, refT, upd = append(roll, m["time/rollout"]), append(refT, m["time/reference"]), append(upd, m["time/update"])
			tot, tps = append(tot, m["time/total"]), append(tps, m["tokens_per_sec"])
			work = append(work, countGRPO(b.model.Config, b.model.Layout.Total, batch))
		}
		return sample{}, nil
	}}
	alternate("grpo", b.warmup, min(b.runs, grpoRuns), rate, bw, step)
	if step.err != nil {
		fail(step.err)
		return
	}
	b.grpo = grpoPhases{measured(roll), measured(refT), measured(upd), measured(tot), measured(tps), work}
	if rate.run != nil {
		b.grpoRate, b.grpoBandwidth = rate.series(b.rateSampler.rate), bw.series(gbps)
	}
}

func (b *bench) grpoRows(add func(Row)) {
	fr := b.sectionFloors(b.grpoRate, b.grpoBandwidth, "sampled before each step")
	where := fr.bwName
	if !fr.own {
		where = "of the run (none sampled beside the steps)"
	}
	gemm, bw := fr.gemm, fr.bw
	gr := fmt.Sprintf("GRPO step, GPT-2 124M: %d prompts × group %d, %d-token prompts, ≤%d new tokens, β = 0.02, micro-batches of 16; floors at the SGEMM rate and bandwidth %s",
		genPrompts, genGroup, genPromptLen, genNew, where)
	p := b.grpo
	if b.grpoRate.ok() {
		add(valueRow(gr, "gemm.pool_grpo", "the floors' SGEMM product on the pool, sampled before each step", "GFLOP/s", b.grpoRate, 0))
		add(valueRow(gr, "mem.bandwidth_grpo", fmt.Sprintf("memory read bandwidth, %d threads over 1 GiB, sampled before each step", b.threads), "GB/s", b.grpoBandwidth, 0))
	}
	// Floors per timed step, then their medians beside the phases' medians.
	var fRoll, fRef, fUpd, fTot, gflops []float64
	if gemm.ok() && bw.ok() {
		ceil, bw := gemm.median()*1e9, bw.median()*1e9
		for i, w := range p.work {
			roll := w.prefill / ceil
			for k := range w.productFLOP {
				products, attention, _ := phaseFloor(w.productFLOP[k], w.weightBytes, w.attendedBytes[k], ceil, bw)
				roll += products + attention
			}
			ref, upd := w.forward/ceil, 3*w.forward/ceil
			fRoll, fRef, fUpd, fTot = append(fRoll, roll), append(fRef, ref), append(fUpd, upd), append(fTot, roll+ref+upd)
			if p.update.ok() && i < len(p.update.samples) {
				gflops = append(gflops, 3*w.forward/p.update.samples[i]/1e9)
			}
		}
	}
	floor := func(v []float64) series {
		if len(v) == 0 {
			return skipped("needs the gemm section (SGEMM rate and bandwidth)")
		}
		return measured(v)
	}
	phase := func(key, name string, s series, f []float64, what string) {
		add(valueRow(gr, "engine.grpo_"+key+"_s", name, "s", s, 0))
		r := valueRow(gr, "floor.grpo_"+key+"_s", "  floor: "+what, "s", floor(f), 0)
		add(r)
		add(ratioRow(gr, "floor.grpo_"+key+"_ratio", "  engine / floor", "", s, floor(f), false))
	}
	phase("rollout", "rollout: sampling with recorded logprobs", p.rollout, fRoll,
		"prefill FLOPs at the SGEMM rate + each decode step's floor by phase")
	phase("reference", "reference: the frozen model's forward", p.reference, fRef,
		"one forward's FLOPs (each group's prompt once) at the SGEMM rate")
	phase("update", "update: forward + backward + clip + AdamW", p.update, fUpd,
		"three forwards' FLOPs at the SGEMM rate")
	r := valueRow(gr, "engine.grpo_update_gflops", "  update rate: three forwards' FLOPs per second", "GFLOP/s", floor(gflops), 0)
	r.Note = "target ≥ 170"
	add(r)
	phase("total", "whole step", p.total, fTot, "the three floors")
	t := ratioRow(gr, "engine.grpo_total_target", "  whole step / 40 s target", "target ≤ 1", p.total, measured([]float64{40}), false)
	add(t)
	add(valueRow(gr, "engine.grpo_tokens_per_s", "new tokens per second of the whole step", "tok/s", p.tokPerS, 0))
}
