package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/rookscript/rookscript/engine/device"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
	"github.com/rookscript/rookscript/engine/rookworld"
	"github.com/rookscript/rookscript/engine/sft"
	"github.com/rookscript/rookscript/internal/procmem"
)

// Peak memory of a workload against its analytic size (gpt2.Footprint: weights, gradients,
// AdamW moments, one micro-batch's activations, the KV cache, one chunk of LM-head logits, the
// sampler's distribution). Each case runs in a child process of its own (rookbench re-runs
// itself with -mem-case), so that nothing the parent holds is counted: the child sets up its
// models, returns what setup left behind to the operating system, resets its peak (VmHWM,
// through /proc/self/clear_refs) and runs its steps; the row is the peak over the steps.
//
// The main job is measured from outside: the real recipe run as a child (bin/rookscript
// recipes/grpo_stable.lua, two steps), its peak resident set read from /proc/<pid>/status
// (VmHWM) as it runs. Not from rusage: a child's ru_maxrss starts from its parent's resident
// set at the fork (Linux carries the forking process's high-water mark across exec), and this
// parent holds gigabytes; /usr/bin/time -v, run from a shell, does not have that problem. It
// needs the default model in the cache.

// memCase is one workload measured in a child process.
type memCase struct {
	key, name string
	run       func(threads int) (memResult, error)
}

// memResult is what a child reports on stdout.
type memResult struct {
	Peak      int64          `json:"peak_bytes"`    // VmHWM over the steps
	Process   int64          `json:"process_bytes"` // the larger of the setup's and the steps' VmHWM
	Footprint gpt2.Footprint `json:"footprint"`     // the analytic size of the workload
	Shape     string         `json:"shape"`         // what ran
	GoHeap    uint64         `json:"go_heap_inuse"` // Go's heap in use after the steps
	Seconds   float64        `json:"seconds_per_step"`
}

var memCases = []memCase{
	{"grpo_default", "GRPO step of the main job on the default model's architecture", memGRPODefault},
	{"sft_default", "SFT step of the default model's build", memSFTDefault},
	{"grpo_124m", "GRPO step of GPT-2 124M (the grpo section's shapes)", memGRPO124M},
}

// memTarget is the bound on measured over analytic.
const memTarget = 1.3

// The main job's shapes (recipes/grpo_stable.lua): 8 prompts × group 8, up to 72 new tokens,
// β > 0, 256 evaluation prompts; the default model is random:small trained. RookWorld prompts
// run 40 to 110 tokens.
const mainPrompts, mainGroup, mainPromptLen, mainNew, mainEvalSize = 8, 8, 96, 72, 256

// The default model's SFT build (scripts/defaultmodel.lua): 16 rows per step, scored after
// the prompt. Rows are about 130 tokens.
const sftDocs, sftLen, sftPrompt = 16, 130, 48

// runMemCase runs one case in this process and prints its result as JSON (the child side).
func runMemCase(name string, threads int) error {
	for _, c := range memCases {
		if c.key == name {
			r, err := c.run(threads)
			if err != nil {
				return err
			}
			return json.NewEncoder(os.Stdout).Encode(r)
		}
	}
	return fmt.Errorf("-mem-case: no case %q", name)
}

// memBegin ends a case's setup: the setup's peak noted, garbage collected and returned to the
// system, the peak reset.
func memBegin(r *memResult) error {
	var err error
	if r.Process, err = procmem.Peak(); err != nil {
		return err
	}
	runtime.GC()
	debug.FreeOSMemory()
	return procmem.ResetPeak()
}

// memEnd fills the peaks and Go's heap.
func memEnd(r *memResult) error {
	var err error
	if r.Peak, err = procmem.Peak(); err != nil {
		return err
	}
	r.Process = max(r.Process, r.Peak)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.GoHeap = ms.HeapInuse
	return nil
}

// randomModel loads a named random architecture on a CPU backend.
func randomModel(spec string, threads int) (*gpt2.Model, error) {
	cfg, params, _, err := gpt2.Load(spec)
	if err != nil {
		return nil, err
	}
	be, err := device.Open("cpu", device.Options{Threads: threads})
	if err != nil {
		return nil, err
	}
	return gpt2.New(be, cfg, params)
}

// randomPrompts is n prompts of l random tokens (below the end-of-text token, so that a
// prompt never contains it).
func randomPrompts(n, l, vocab int, seed uint64) [][]int32 {
	r := rand.New(rand.NewPCG(seed, seed))
	out := make([][]int32, n)
	for p := range out {
		out[p] = make([]int32, l)
		for i := range out[p] {
			out[p][i] = int32(r.IntN(min(vocab, int(rollout.EOT))))
		}
	}
	return out
}

// grpoMem runs GRPO steps of a policy and a reference of spec at the given shapes, micro-batch
// micro, and returns the peak over the steps beside the analytic size of what the step holds.
func grpoMem(spec string, threads, prompts, group, promptLen, newTokens, micro, steps int) (memResult, error) {
	var r memResult
	policy, err := randomModel(spec, threads)
	if err != nil {
		return r, err
	}
	ref, err := gpt2.New(policy.B, policy.Config, policy.ParamsHost())
	if err != nil {
		return r, err
	}
	opt, err := optim.NewAdamW(policy, optim.AdamWConfig{LR: 1e-6, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	if err != nil {
		return r, err
	}
	tr := &grpo.Trainer{Policy: policy, Ref: ref, Opt: opt}
	sampler := rollout.NewSampler(policy)
	ps := randomPrompts(prompts, promptLen, policy.Config.VocabSize, 5)
	cfg := grpo.DefaultConfig()
	cfg.Beta, cfg.MicroBatch = 0.02, micro
	if err := memBegin(&r); err != nil {
		return r, err
	}
	longest := 0
	t0 := time.Now()
	for i := range steps {
		b, err := sampler.Generate(context.Background(), ps, rollout.Config{Group: group, MaxNewTokens: newTokens, Temperature: 1, Seed: uint64(100 + i)})
		if err != nil {
			return r, err
		}
		b.Rewards = make([]float64, len(b.Completions))
		for k, c := range b.Completions {
			longest = max(longest, len(c.Tokens))
			for _, t := range c.Tokens {
				b.Rewards[k] += float64(t%7) / float64(len(c.Tokens))
			}
		}
		if _, err := tr.Step(context.Background(), b, cfg); err != nil {
			return r, err
		}
	}
	r.Seconds = time.Since(t0).Seconds() / float64(steps)
	if err := memEnd(&r); err != nil {
		return r, err
	}
	// The step packs each group's prompt once (grpo shares it among the group's completions).
	plan := grpo.Plan{Model: policy.Config, Prompts: prompts, Group: group, PromptLen: promptLen, NewTokens: longest,
		Minibatches: 1, Reference: true, EvalSlots: prompts * group, EvalNewTokens: newTokens}
	r.Footprint = plan.Footprint(micro)
	r.Shape = fmt.Sprintf("%s, %d prompts × group %d, %d-token prompts, ≤%d new tokens (longest %d), micro-batches of %d, β > 0",
		spec, prompts, group, promptLen, newTokens, longest, micro)
	return r, nil
}

// mainMicroBatch is the micro-batch recipes/grpo_stable.lua plans on this machine: its
// bounds, half the RAM.
func mainMicroBatch(cfg gpt2.Config) int {
	ram, err := procmem.RAM()
	if err != nil {
		ram = 8 << 30
	}
	p := grpo.Plan{Model: cfg, Budget: ram / 2, Prompts: mainPrompts, Group: mainGroup, PromptLen: rookworld.MaxPromptTokens,
		NewTokens: mainNew, Minibatches: 1, Reference: true, EvalSlots: mainEvalSize, EvalNewTokens: rookworld.MaxAnswerTokens}
	n, _, _ := p.MicroBatch()
	return n
}

func memGRPODefault(threads int) (memResult, error) {
	cfg, _, _, err := gpt2.Load("random:small")
	if err != nil {
		return memResult{}, err
	}
	return grpoMem("random:small@seed=1", threads, mainPrompts, mainGroup, mainPromptLen, mainNew, mainMicroBatch(cfg), 2)
}

func memGRPO124M(threads int) (memResult, error) {
	return grpoMem(modelSpec, threads, genPrompts, genGroup, genPromptLen, genNew, 16, 1)
}

func memSFTDefault(threads int) (memResult, error) {
	var r memResult
	m, err := randomModel("random:small@seed=1", threads)
	if err != nil {
		return r, err
	}
	opt, err := optim.NewAdamW(m, optim.AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	if err != nil {
		return r, err
	}
	docs := make([]sft.Doc, sftDocs)
	for i, p := range randomPrompts(sftDocs, sftLen, m.Config.VocabSize, 6) {
		docs[i] = sft.Doc{Tokens: p, ScoreFrom: sftPrompt}
	}
	if err := memBegin(&r); err != nil {
		return r, err
	}
	const steps = 3
	t0 := time.Now()
	for range steps {
		if _, err := sft.Step(context.Background(), m, opt, docs, sft.Config{LR: 1e-3, MaxGradNorm: 1}); err != nil {
			return r, err
		}
	}
	r.Seconds = time.Since(t0).Seconds() / steps
	if err := memEnd(&r); err != nil {
		return r, err
	}
	r.Footprint = m.Config.Footprint(gpt2.Use{Train: true, Rows: sftDocs * sftLen, Scored: sftDocs * (sftLen - 1 - sftPrompt)})
	r.Shape = fmt.Sprintf("random:small, %d documents of %d tokens scored after %d, one micro-batch", sftDocs, sftLen, sftPrompt)
	return r, nil
}

// memRun is one case's outcome in the parent.
type memRun struct {
	res memResult
	err error
}

// mainJob is the real recipe's measurement.
type mainJob struct {
	peak    int64
	seconds float64
	err     error
}

// runMem runs every case in a child process, then the main job.
func (b *bench) runMem() {
	progress("== Peak memory against the analytic size (each case in a child process)")
	self, err := os.Executable()
	b.memRuns = map[string]memRun{}
	for _, c := range memCases {
		if err != nil {
			b.memRuns[c.key] = memRun{err: err}
			continue
		}
		t := time.Now()
		var out, errb bytes.Buffer
		cmd := exec.Command(self, "-mem-case", c.key, "-threads", strconv.Itoa(b.threads))
		cmd.Stdout, cmd.Stderr = &out, &errb
		var r memResult
		if e := cmd.Run(); e != nil {
			b.memRuns[c.key] = memRun{err: fmt.Errorf("%v: %s", e, strings.TrimSpace(errb.String()))}
			b.failure("mem "+c.key, b.memRuns[c.key].err)
			continue
		}
		if e := json.Unmarshal(out.Bytes(), &r); e != nil {
			b.memRuns[c.key] = memRun{err: e}
			b.failure("mem "+c.key, e)
			continue
		}
		b.memRuns[c.key] = memRun{res: r}
		progress("  %s: peak %.0f MB, analytic %.0f MB (%.1f s)", c.key, mb(r.Peak), mb(r.Footprint.Total()), time.Since(t).Seconds())
	}
	b.main = b.runMainJob()
}

// runMainJob runs bin/rookscript recipes/grpo_stable.lua for two steps in a scratch run
// directory and follows its peak resident set (VmHWM) every 20 ms until it exits.
func (b *bench) runMainJob() mainJob {
	root := filepath.Dir(b.scripts)
	bin := filepath.Join(root, "bin", "rookscript")
	if _, err := os.Stat(bin); err != nil {
		return mainJob{err: fmt.Errorf("%s not built (make build)", bin)}
	}
	dir, err := os.MkdirTemp("", "rookbench-main-")
	if err != nil {
		return mainJob{err: err}
	}
	defer os.RemoveAll(dir)
	cached, err := defaultModelCached(bin, root, dir)
	if err != nil {
		return mainJob{err: err}
	}
	if !cached {
		return mainJob{err: errors.New("the default model is not in the cache yet: `make run` builds it once (about 10 min)")}
	}
	progress("  main job: %s recipes/grpo_stable.lua steps=2 (real recipe, cached default model)", bin)
	cmd := exec.Command(bin, "recipes/grpo_stable.lua", "steps=2", "run_dir="+filepath.Join(dir, "run"),
		"threads="+strconv.Itoa(b.threads))
	cmd.Dir = root
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &errb, &errb
	t := time.Now()
	if err := cmd.Start(); err != nil {
		return mainJob{err: err}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var peak int64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if v, err := procmem.PeakOf(cmd.Process.Pid); err == nil {
			peak = max(peak, v)
		}
		select {
		case err := <-done:
			if err != nil {
				return mainJob{err: fmt.Errorf("%v: %s", err, lastLines(errb.String(), 3))}
			}
			j := mainJob{peak: peak, seconds: time.Since(t).Seconds()}
			progress("  main job: peak %.0f MB in %.0f s", mb(j.peak), j.seconds)
			return j
		case <-tick.C:
		}
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], " | ")
}

// defaultModelCached reports whether the cache holds the default model the main job loads.
// Where that is, the cache root (rook.cache_dir()) and the entry of the model's version, is
// scripts/defaultmodel.lua's to say: bin asks it, in root as the main job runs, with a one-line
// script written in tmp; the model is there once the entry has model/config.json (what
// defaultmodel.ensure looks for).
func defaultModelCached(bin, root, tmp string) (bool, error) {
	where := filepath.Join(tmp, "where.lua")
	if err := os.WriteFile(where, []byte(`print(require("defaultmodel").dir())`+"\n"), 0o644); err != nil {
		return false, err
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, "--quiet", where)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return false, fmt.Errorf("asking %s where the default model is cached: %w: %s", bin, err, lastLines(errb.String(), 3))
	}
	entry := strings.TrimSpace(out.String())
	if entry == "" {
		return false, fmt.Errorf("%s printed no cache directory for the default model", bin)
	}
	if !filepath.IsAbs(entry) {
		entry = filepath.Join(root, entry)
	}
	_, err := os.Stat(filepath.Join(entry, "model", "config.json"))
	return err == nil, nil
}

func mb(b int64) float64 { return float64(b) / 1e6 }

// memRows adds the memory rows: per case, the measured peak, the analytic size and their ratio.
func (b *bench) memRows(add func(Row)) {
	gr := fmt.Sprintf("Peak resident memory against the analytic size (target: within %.1fx; main job under 1 GB)", memTarget)
	one := func(v float64) series { return measured([]float64{v}) }
	for _, c := range memCases {
		r := b.memRuns[c.key]
		if r.err != nil {
			add(valueRow(gr, "mem."+c.key, c.name, "MB", skipped(r.err.Error()), 0))
			continue
		}
		peak := valueRow(gr, "mem."+c.key+"_peak", c.name+": peak RSS over the step", "MB", one(mb(r.res.Peak)), 0)
		peak.Note = fmt.Sprintf("%s; whole process %.0f MB; Go heap in use %.0f MB; %.1f s/step",
			r.res.Shape, mb(r.res.Process), float64(r.res.GoHeap)/1e6, r.res.Seconds)
		add(peak)
		an := valueRow(gr, "mem."+c.key+"_analytic", "  analytic size", "MB", one(mb(r.res.Footprint.Total())), 0)
		an.Note = r.res.Footprint.String()
		add(an)
		add(ratioRow(gr, "mem."+c.key+"_ratio", "  peak / analytic", fmt.Sprintf("target ≤ %.1f", memTarget),
			one(mb(r.res.Peak)), one(mb(r.res.Footprint.Total())), false))
	}
	j := b.main
	if j.err != nil {
		add(valueRow(gr, "mem.main_job", "main job (bin/rookscript recipes/grpo_stable.lua steps=2)", "MB", skipped(j.err.Error()), 0))
		return
	}
	row := valueRow(gr, "mem.main_job_peak", "main job: bin/rookscript recipes/grpo_stable.lua steps=2, peak RSS (VmHWM)", "MB", one(mb(j.peak)), 0)
	row.Note = fmt.Sprintf("the whole process: its GRPO steps (analytic size above) and evaluations, Lua, the tokenizer, the Go collector's headroom; %.0f s", j.seconds)
	add(row)
	add(ratioRow(gr, "mem.main_job_ratio", "  main job peak / 1 GB", "target ≤ 1", one(mb(j.peak)), one(1000), false))
}
