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
}

// grpoRuns caps the timed GRPO steps: one takes about a minute on two cores.
const grpoRuns = 2

func (b *bench) runGRPO() {
	progress("== GRPO step, %d×%d sequences, %d-token prompts, %d new tokens", genPrompts, genGroup, genPromptLen, genNew)
	runtime.GC()
	fail := func(err error) {
		why := err.Error()
		b.grpo = grpoPhases{skipped(why), skipped(why), skipped(why), skipped(why), skipped(why)}
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
	for i := range b.warmup + min(b.runs, grpoRuns) {
		batch, err := sampler.Generate(context.Background(), prompts,
			rollout.Config{Group: genGroup, MaxNewTokens: genNew, Temperature: 1, Seed: uint64(100 + i)})
		if err != nil {
			fail(err)
			return
		}
		batch.Rewards = make([]float64, len(batch.Completions))
		for k, c := range batch.Completions {
			for _, t := range c.Tokens {
				batch.Rewards[k] += float64(t%7) / float64(len(c.Tokens))
			}
		}
		m, err := tr.Step(context.Background(), batch, cfg)
		if err != nil {
			fail(err)
			return
		}
		progress("  grpo step %d: rollout %.1f s, reference %.1f s, update %.1f s", i+1, m["time/rollout"], m["time/reference"], m["time/update"])
		if i < b.warmup {
			continue
		}
		roll, refT, upd = append(roll, m["time/rollout"]), append(refT, m["time/reference"]), append(upd, m["time/update"])
		tot, tps = append(tot, m["time/total"]), append(tps, m["tokens_per_sec"])
	}
	b.grpo = grpoPhases{measured(roll), measured(refT), measured(upd), measured(tot), measured(tps)}
}

func (b *bench) grpoRows(add func(Row)) {
	gr := fmt.Sprintf("GRPO step, GPT-2 124M: %d prompts × group %d, %d-token prompts, ≤%d new tokens, β = 0.02, micro-batches of 16",
		genPrompts, genGroup, genPromptLen, genNew)
	p := b.grpo
	add(valueRow(gr, "engine.grpo_rollout_s", "rollout: sampling with recorded logprobs", "s", p.rollout, 0))
	add(valueRow(gr, "engine.grpo_reference_s", "reference: the frozen model's forward", "s", p.reference, 0))
	add(valueRow(gr, "engine.grpo_update_s", "update: forward + backward + clip + AdamW", "s", p.update, 0))
	add(valueRow(gr, "engine.grpo_total_s", "whole step", "s", p.total, 0))
	add(valueRow(gr, "engine.grpo_tokens_per_s", "new tokens per second of the whole step", "tok/s", p.tokPerS, 0))
}
