package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/dist"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
)

// The dp section: a GRPO step of the default model's architecture (7.3M parameters, random
// weights) at the GRPO section's rollout shapes, on 1 and on 2 ranks of one thread each
// (mpirun), the ranks summing their gradients over MPI as a data-parallel run does
// (engine/grpo/whole.go). Ideal scaling halves the step; the efficiency is t₁ / (2·t₂).

// dpRanks are the world sizes the dp section times.
var dpRanks = []int{1, 2}

type dpResult struct {
	step map[int]series // world size → seconds per step (the slowest rank's)
}

func (b *bench) runDP() {
	progress("== data-parallel GRPO step, default model's architecture, 1 thread per rank")
	b.dp = dpResult{step: map[int]series{}}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		for _, n := range dpRanks {
			b.dp.step[n] = skipped("mpirun is not installed (make setup)")
		}
		return
	}
	self, err := os.Executable()
	if err != nil {
		b.failure("dp", err)
		return
	}
	for _, n := range dpRanks {
		args := []string{"--oversubscribe", "--bind-to", "core", "-np", fmt.Sprint(n)}
		if os.Geteuid() == 0 {
			args = append([]string{"--allow-run-as-root"}, args...)
		}
		args = append(args, self, "-dp-child", "-threads", "1", "-runs", fmt.Sprint(b.runs), "-warmup", fmt.Sprint(b.warmup))
		cmd := exec.Command(mpirun, args...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			b.dp.step[n] = skipped(err.Error())
			b.failure("dp", fmt.Errorf("%d ranks: %w", n, err))
			continue
		}
		var steps []float64
		if err := json.Unmarshal(out, &steps); err != nil {
			b.failure("dp", fmt.Errorf("%d ranks: %w: %q", n, err, out))
			continue
		}
		b.dp.step[n] = measured(steps)
		progress("  %d rank(s): %v s per step", n, steps)
	}
}

// dpChild is one rank of the dp section (rookbench -dp-child under mpirun): warm-up, then
// timed GRPO steps on its share of the batch; rank 0 prints the steps' times as JSON.
func dpChild(runs, warmup int) error {
	runtime.GOMAXPROCS(1)
	c, err := dist.Open()
	if err != nil {
		return err
	}
	defer c.Close()
	cfg := gpt2.RandomConfigs["small"]
	m, err := gpt2.New(cpu.New(1), cfg, gpt2.RandomParams(cfg, 1))
	if err != nil {
		return err
	}
	ref, err := gpt2.New(m.B, cfg, m.ParamsHost())
	if err != nil {
		return err
	}
	opt, err := optim.NewAdamW(m, optim.AdamWConfig{LR: 3e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	if err != nil {
		return err
	}
	tr := &grpo.Trainer{Policy: m, Ref: ref, Opt: opt, Comm: c}
	sampler := rollout.NewSampler(m)
	prompts := genPromptTokens(cfg.VocabSize)
	var share [][]int32
	var groups []int
	for g := c.Rank(); g < len(prompts); g += c.Size() {
		share, groups = append(share, prompts[g]), append(groups, g)
	}
	gcfg := grpo.DefaultConfig()
	gcfg.Beta, gcfg.MicroBatch = 0.02, 16
	var steps []float64
	for i := range warmup + runs {
		batch, err := sampler.Generate(context.Background(), share, rollout.Config{Group: genGroup, MaxNewTokens: genNew,
			Temperature: 1, Seed: uint64(100 + i), Occurrences: make([]int, len(share))})
		if err != nil {
			return err
		}
		batch.Groups, batch.TotalGroups = groups, len(prompts)
		batch.Rewards = make([]float64, len(batch.Completions))
		for k, cp := range batch.Completions {
			for _, t := range cp.Tokens {
				batch.Rewards[k] += float64(t%7) / float64(len(cp.Tokens))
			}
		}
		met, err := tr.Step(context.Background(), batch, gcfg)
		if err != nil {
			return err
		}
		if i >= warmup {
			steps = append(steps, met["time/total"])
		}
	}
	if c.Rank() == 0 {
		return json.NewEncoder(os.Stdout).Encode(steps)
	}
	return nil
}

func (b *bench) dpRows(add func(Row)) {
	gr := fmt.Sprintf("data-parallel GRPO step, the default model's architecture (7.3M): %d prompts × group %d, ≤%d new tokens; ranks of 1 thread (mpirun)",
		genPrompts, genGroup, genNew)
	for _, n := range dpRanks {
		add(valueRow(gr, fmt.Sprintf("engine.dp_step_%d_ranks_s", n), fmt.Sprintf("step on %d rank(s)", n), "s", b.dp.step[n], 0))
	}
	one, two := b.dp.step[1], b.dp.step[2]
	r := ratioRow(gr, "engine.dp_speedup_2", "  speed-up on 2 ranks (ideal 2)", "t₁ / t₂", one, two, false)
	add(r)
	if one.ok() && two.ok() {
		eff := one.median() / (2 * two.median())
		r := valueRow(gr, "engine.dp_efficiency_2", "  efficiency: speed-up / 2", "", measured([]float64{eff}), 0)
		r.Note = strings.TrimSpace(fmt.Sprintf("%.0f%% of ideal", 100*eff))
		add(r)
	}
}
