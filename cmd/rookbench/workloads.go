package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/backend/cpu"
	"github.com/rookscript/rookscript/engine/device"
	"github.com/rookscript/rookscript/engine/dist"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
	"github.com/rookscript/rookscript/engine/rookworld"
	"github.com/rookscript/rookscript/internal/procmem"
)

// newModel builds a model of spec (a random one, by name) on be, or where be is nil on a CPU
// backend of its own of threads threads.
func newModel(be backend.Backend, spec string, threads int) (*gpt2.Model, error) {
	t := time.Now()
	cfg, params, src, err := gpt2.Load(spec)
	if err == nil && be == nil {
		be, err = device.Open("cpu", device.Options{Threads: threads})
	}
	if err != nil {
		return nil, err
	}
	progress("  engine: %s, ready in %.1f s", src.Description, time.Since(t).Seconds())
	return gpt2.New(be, cfg, params)
}

// loadModel builds the bench's model once, on the engine's backend.
func (b *bench) loadModel() error {
	be, err := b.backend()
	if err == nil && b.model == nil {
		b.model, err = newModel(be, modelSpec, b.threads)
	}
	return err
}

// engineSteps are the engine's forward (LM head and log-softmax on every row) and its train
// step as it trains (ZeroGrads, ForwardBackward of the mean cross-entropy, AdamW) on bsz
// random sequences of t tokens, each run once outside any measurement to touch every buffer.
func engineSteps(m *gpt2.Model, bsz, t int) (steps [2]func() (sample, error), err error) {
	batch, out := &gpt2.Batch{}, &gpt2.Output{}
	for _, s := range randomPrompts(bsz, t+1, m.Config.VocabSize, 2) {
		batch.Add(s[:t], 0)
		batch.Rows, batch.Targets = append(batch.Rows, int32(len(batch.Tokens)-1)), append(batch.Targets, s[t])
	}
	opt, err := optim.NewAdamW(m, optim.DefaultAdamW())
	w := -1 / float32(len(batch.Rows))
	steps[0] = func() (sample, error) { return sample{}, m.Forward(batch, 1, false, out) }
	steps[1] = func() (sample, error) {
		m.ZeroGrads()
		err := m.ForwardBackward(batch, 1, false, func(_ int, _, _, dlogp, _ []float32) {
			for i := range dlogp {
				dlogp[i] = w
			}
		}, out)
		opt.Step(1e-4)
		finishBuf(m.B, m.Params)
		return sample{}, err
	}
	for i := 0; i < len(steps) && err == nil; i++ {
		_, err = steps[i]()
	}
	return steps, err
}

// runSteps alternates the engine's and PyTorch's forward, then their train steps, each beside
// the floor rates' samples. The floor is the weight products at the GEMM rate: once for the
// forward, three times (forward and backward) for the train step.
func (b *bench) runSteps() {
	progress("== GPT-2 124M forward and train step, B=%d T=%d", b.batch, b.seq)
	rows := b.batch * b.seq
	flop := 2 * weights(gpt2.RookWorld124M, true) * float64(rows)
	var steps [2]func() (sample, error)
	var torch *torchProc
	var engErr, torErr error
	if b.sel["engine"] {
		if engErr = b.loadModel(); engErr == nil {
			steps, engErr = engineSteps(b.model, b.batch, b.seq)
		}
	}
	if b.sel["torch"] {
		torch, torErr = b.startTorch("torch_gpt2.py", "--batch", fmt.Sprint(b.batch), "--seq", fmt.Sprint(b.seq))
		if torErr == nil {
			defer torch.Close()
		}
	}
	for i, w := range []struct {
		key, op, title string
		work           []phase // forward and backward: three passes of products
	}{
		{"forward", "forward", fmt.Sprintf("forward, LM head + log-softmax on all %d rows", rows), []phase{{flop: flop}}},
		{"train_step", "train", "train step as the engine trains (ZeroGrads, ForwardBackward, AdamW)",
			[]phase{{flop: 3 * flop}, adamWork(gpt2.RookWorld124M)}},
	} {
		group := fmt.Sprintf("GPT-2 124M %s, B=%d T=%d", w.title, b.batch, b.seq)
		eng, peer := &contender{name: "engine", run: steps[i], err: engErr}, &contender{name: "torch", err: torErr}
		if torch != nil {
			peer.run = func() (sample, error) { return torch.Do(w.op) }
		}
		r := b.measure(group, w.key, b.runs, 1, eng, peer)
		b.versus(group, w.key, "torch", eng, peer, wallMS, "ms", r.ms(w.work...), r.atPeak(w.work...))
		b.train = eng.series(wallMS) // kept from the last, the train step
	}
}

func (b *bench) runLLMC() {
	progress("== llm.c")
	s, err := runLLMC(b.llmcDir, b.threads, b.warmup, b.runs)
	if err != nil {
		s = b.failure("llm.c", err)
	}
	group := "llm.c's CPU trainer as its Makefile builds it (-march=native, OpenMP), B=4 T=64, its own timer"
	b.add(valueRow(group, "llmc.train_step", "llm.c train_gpt2", "ms", s))
	if b.sel["engine"] {
		b.add(ratioRow(group, "speedup.train_step_vs_llmc", "engine speed-up", "llm.c / engine", s, b.train, false))
	}
}

// The rollout's shapes: genPrompts prompts of genPromptLen tokens, genGroup samples each,
// genNew decode steps.
const genPrompts, genGroup, genPromptLen, genNew = 8, 8, 80, 64

// gen8Repeat is how often the 8-row generation and the floor rates' samples run in a round: an
// 8-row generation is far shorter, and a best rate needs samples enough to miss a slowed moment.
const gen8Repeat = 3

// randomPrompts is n prompts of l random tokens, none of them the end-of-text token.
func randomPrompts(n, l, vocab int, seed uint64) [][]int32 {
	r, out := rand.New(rand.NewPCG(seed, seed)), make([][]int32, n)
	for p := range out {
		for range l {
			out[p] = append(out[p], int32(r.IntN(min(vocab, int(rollout.EOT)))))
		}
	}
	return out
}

func genPromptTokens(vocab int) [][]int32 { return randomPrompts(genPrompts, genPromptLen, vocab, 4) }

// greedy is KV-cache generation through the bench model's own calls: Prefill of the first
// nPrompts prompts (one slot each), ShareSlot with the group's other slots, then genNew greedy
// steps: DecodeLogits and the logits' argmax (no softmax: torch's greedy loop takes none), or
// DecodeSample's greedy draws where the device samples. A sample has its prefill and decode ms.
func (b *bench) greedy(nPrompts int) (func() (sample, error), error) {
	if err := b.loadModel(); err != nil {
		return nil, err
	}
	m, threads, group, seqs, v := b.model, b.threads, genGroup, nPrompts*genGroup, b.model.Config.VocabSize
	kv, err := m.NewKVCache(seqs, genPromptLen+genNew)
	var prompts gpt2.Batch
	first, tokens, promptSlots := make([]int32, nPrompts), make([]int32, seqs), make([]int32, nPrompts)
	slots, pos := make([]int32, seqs), make([]int32, seqs)
	for p, s := range genPromptTokens(v)[:nPrompts] {
		prompts.Add(s, len(s))
		promptSlots[p] = int32(p * group)
	}
	draws := gpt2.Draws{Greedy: true, Rows: slots, Streams: make([]uint64, seqs), Positions: make([]int32, seqs)}
	for i := range slots {
		slots[i] = int32(i)
	}
	return func() (sample, error) {
		t0 := time.Now()
		d, err := m.Prefill(kv, &prompts, promptSlots, 1)
		if err != nil {
			return sample{}, err
		}
		argmaxRows(first, d.Logits, v, threads)
		for s := range tokens {
			if tokens[s] = first[s/group]; s%group > 0 {
				if err := m.ShareSlot(kv, s, s/group*group, genPromptLen); err != nil {
					return sample{}, err
				}
			}
		}
		t1 := time.Now()
		for step := range genNew {
			for s := range pos {
				pos[s] = int32(genPromptLen + step)
			}
			if m.SamplesOnDevice() {
				next, _, err := m.DecodeSample(kv, tokens, slots, pos, 1, draws)
				if copy(tokens, next); err != nil {
					return sample{}, err
				}
			} else if logits, err := m.DecodeLogits(kv, tokens, slots, pos); err != nil {
				return sample{}, err
			} else {
				argmaxRows(tokens, logits, v, threads)
			}
		}
		return sample{prefill: ms(t1.Sub(t0)), decode: ms(time.Since(t1))}, nil
	}, err
}

// argmaxRows sets out[i] to the index of the largest of row i of logits, on threads
// goroutines, as torch's argmax runs on its threads.
func argmaxRows(out []int32, logits []float32, v, threads int) {
	var wg sync.WaitGroup
	for lo, per := 0, (len(out)+threads-1)/threads; lo < len(out); lo += per {
		wg.Go(func() {
			for i := lo; i < min(len(out), lo+per); i++ {
				out[i] = rollout.Argmax(logits[i*v : (i+1)*v])
			}
		})
	}
	wg.Wait()
}

// runGen alternates the engine's greedy generation of 64 and 8 rows and PyTorch's with a
// static cache (its faster), beside the floor rates' samples.
func (b *bench) runGen() {
	cfg, seqs := gpt2.RookWorld124M, genPrompts*genGroup
	group := fmt.Sprintf("Greedy KV-cache generation: %d prompts × %d samples, %d-token prompts, %d steps",
		genPrompts, genGroup, genPromptLen, genNew)
	progress("== %s", group)
	eng := &contender{name: fmt.Sprintf("engine, %d rows (+ argmax)", seqs)}
	eng8 := &contender{name: fmt.Sprintf("engine, %d rows of 1 prompt", genGroup), repeat: gen8Repeat}
	peer := &contender{name: fmt.Sprintf("torch, static cache, %d rows", seqs)}
	if b.sel["gen"] {
		eng.run, eng.err = b.greedy(genPrompts)
		eng8.run, eng8.err = b.greedy(1)
	}
	if b.sel["torch"] {
		p, err := b.startTorch("torch_generate.py", "--prompts", fmt.Sprint(genPrompts),
			"--group", fmt.Sprint(genGroup), "--prompt-len", fmt.Sprint(genPromptLen), "--new", fmt.Sprint(genNew))
		if peer.err = err; err == nil {
			defer p.Close()
			peer.run = func() (sample, error) { return p.Do("gen:static") }
		}
	}
	r := b.measure(group, "gen", b.genRuns, gen8Repeat, eng, peer, eng8)
	// A step reads each prompt's cached positions once (its samples share them), then each row's
	// own: (genNew+1)/2 on average.
	cached := func(rows, prompts int) float64 { return float64(prompts*genPromptLen) + float64(rows*(genNew+1))/2 }
	decode := func(s sample) float64 { return s.decode / genNew }
	work := decodeWork(cfg, seqs, cached(seqs, genPrompts))
	b.versus(group, "gen_decode_step", "torch", eng, peer, decode, "ms", r.ms(work...), r.atPeak(work...))
	if b.sel["gen"] {
		work = decodeWork(cfg, genGroup, cached(genGroup, 1))
		b.add(valueRow(group, "engine.gen_decode_step_8", eng8.name, "ms", b.record(eng8, decode), r.ms(work...)).
			ofPeak(r.atPeak(work...)))
		head := weights(cfg, true) - weights(cfg, false)
		work = []phase{{flop: 2 * (weights(cfg, false)*genPrompts*genPromptLen + head*genPrompts)}}
		name := fmt.Sprintf("engine Prefill %d×%d, shared with %d slots", genPrompts, genPromptLen, seqs)
		prefill := eng.series(func(s sample) float64 { return s.prefill })
		b.add(valueRow(group, "engine.gen_prefill", name, "ms", prefill, r.ms(work...)).ofPeak(r.atPeak(work...)))
	}
}

// stepper takes GRPO step i: it samples, lets prep adjust the batch, rewards and updates.
type stepper func(i int, prep func(*rollout.Batch)) (*rollout.Batch, map[string]float64, error)

// grpoStepper samples group completions of prompts, rewards each by a fixed function of its
// tokens (a signal without an engine) and takes a GRPO step (β = 0.02, micro-batches of micro)
// against a frozen copy of m; step i samples with seed 100+i.
func grpoStepper(m *gpt2.Model, lr float64, prompts [][]int32, group, newTokens, micro int,
	comm dist.Comm) (stepper, error) {
	ref, err := gpt2.New(m.B, m.Config, m.ParamsHost())
	if err != nil {
		return nil, err
	}
	opt, err := optim.NewAdamW(m, optim.AdamWConfig{LR: lr, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8})
	tr, sampler := &grpo.Trainer{Policy: m, Ref: ref, Opt: opt, Comm: comm}, rollout.NewSampler(m)
	cfg := grpo.DefaultConfig()
	cfg.Beta, cfg.MicroBatch = 0.02, micro
	return func(i int, prep func(*rollout.Batch)) (*rollout.Batch, map[string]float64, error) {
		rc := rollout.Config{Group: group, MaxNewTokens: newTokens, Temperature: 1, Seed: uint64(100 + i)}
		if comm != nil {
			rc.Occurrences = make([]int, len(prompts))
		}
		batch, err := sampler.Generate(context.Background(), prompts, rc)
		if err != nil {
			return nil, nil, err
		}
		prep(batch)
		batch.Rewards = make([]float64, len(batch.Completions))
		for k, c := range batch.Completions {
			for _, t := range c.Tokens {
				batch.Rewards[k] += float64(t%7) / float64(len(c.Tokens))
			}
		}
		met, err := tr.Step(context.Background(), batch, cfg)
		return batch, met, err
	}, err
}

// runGRPO times GRPO steps by phase, each phase against its floor from the step's own batch
// (grpoWork), beside the floor rates' samples.
func (b *bench) runGRPO() {
	progress("== GRPO step, %d×%d sequences, %d-token prompts", genPrompts, genGroup, genPromptLen)
	group := fmt.Sprintf("GRPO step, GPT-2 124M: %d prompts × group %d, %d-token prompts, ≤%d new tokens, "+
		"β = 0.02, micro-batches of 16", genPrompts, genGroup, genPromptLen, genNew)
	var step stepper
	err := b.loadModel()
	if err == nil {
		step, err = grpoStepper(b.model, 1e-6, genPromptTokens(b.model.Config.VocabSize), genGroup, genNew, 16, nil)
	}
	phases := []struct{ key, metric, name string }{
		{"rollout", "time/rollout", "rollout: sampling with recorded logprobs"},
		{"reference", "time/reference", "reference: the frozen model's forward"},
		{"update", "time/update", "update: forward + backward + clip + AdamW"},
		{"total", "time/total", "whole step"},
	}
	got, batches, i := make([][]float64, len(phases)), []*rollout.Batch{}, 0
	steps := &contender{name: "step", err: err, run: func() (sample, error) {
		batch, m, err := step(i, func(*rollout.Batch) {})
		if i++; err == nil && i > b.warmup {
			progress("  grpo step %d: rollout %.1f s, reference %.1f s, update %.1f s",
				i, m["time/rollout"], m["time/reference"], m["time/update"])
			for k, p := range phases {
				got[k] = append(got[k], m[p.metric])
			}
			batches = append(batches, batch)
		}
		return sample{}, err
	}}
	r := b.measure(group, "grpo", min(b.runs, 3), gen8Repeat, steps) // long steps: three pass over one slowed
	if steps.err != nil {
		b.failure("grpo", steps.err)
		return
	}
	floors, peaks, opt := make([][]float64, len(phases)), make([][]float64, len(phases)), adamWork(b.model.Config)
	for _, w := range batches { // by phase: rollout, reference, update (three passes and AdamW), the whole step
		roll, f := grpoWork(b.model.Config, w)
		for k, work := range [][]phase{roll, {f}, {f, f, f, opt}, slices.Concat(roll, []phase{f, f, f, f, opt})} {
			floors[k], peaks[k] = append(floors[k], r.ms(work...)/1e3), append(peaks[k], r.atPeak(work...)/1e3)
		}
	}
	for k, p := range phases {
		b.add(valueRow(group, "engine.grpo_"+p.key+"_s", p.name, "s", measured(got[k]), floors[k]...).
			ofPeak(median(peaks[k])))
	}
}

// runDP times a GRPO step of the default model's architecture on 1 and 2 ranks of one thread
// (mpirun), the ranks summing their gradients as a data-parallel run does.
func (b *bench) runDP() {
	progress("== data-parallel GRPO step, default model's architecture, 1 thread per rank")
	group := fmt.Sprintf("data-parallel GRPO step, the default model's architecture: %d prompts × group %d, "+
		"≤%d new tokens; ranks of 1 thread (mpirun)", genPrompts, genGroup, genNew)
	mpirun, err := exec.LookPath("mpirun")
	self, _ := os.Executable()
	if err != nil {
		err = fmt.Errorf("mpirun is not installed (make setup): %w", err)
	}
	steps := map[int]series{}
	for _, n := range []int{1, 2} {
		args := []string{"--oversubscribe", "--bind-to", "core", "-np", fmt.Sprint(n), self, "-dp-child",
			"-threads", "1", "-runs", fmt.Sprint(b.runs), "-warmup", fmt.Sprint(b.warmup)}
		if os.Geteuid() == 0 {
			args = append([]string{"--allow-run-as-root"}, args...)
		}
		var s []float64
		if steps[n] = skipped(fmt.Sprint(err)); err == nil {
			if e := runChild(exec.Command(mpirun, args...), &s); e != nil {
				steps[n] = b.failure("dp", fmt.Errorf("%d ranks: %w", n, e))
			} else {
				steps[n] = measured(s)
			}
		}
		b.add(valueRow(group, fmt.Sprintf("engine.dp_step_%d_ranks_s", n), fmt.Sprintf("step on %d rank(s)", n), "s", steps[n]))
	}
	b.add(ratioRow(group, "engine.dp_speedup_2", "  speed-up on 2 ranks", "ideal 2", steps[1], steps[2], false))
}

// dpChild is one rank of the dp section: warm-up, then timed GRPO steps on its share of the
// prompts; rank 0 prints the steps' seconds as JSON.
func dpChild(runs, warmup int) error {
	c, err := dist.Open()
	if err != nil {
		return err
	}
	defer c.Close()
	m, err := newModel(nil, smallSpec, 1)
	if err != nil {
		return err
	}
	all := genPromptTokens(m.Config.VocabSize)
	var share [][]int32
	var groups []int
	for g := c.Rank(); g < len(all); g += c.Size() {
		share, groups = append(share, all[g]), append(groups, g)
	}
	step, err := grpoStepper(m, 3e-4, share, genGroup, genNew, 16, c)
	var secs []float64
	for i := 0; i < warmup+runs && err == nil; i++ {
		var met map[string]float64
		_, met, err = step(i, func(b *rollout.Batch) { b.Groups, b.TotalGroups = groups, len(all) })
		if i >= warmup {
			secs = append(secs, met["time/total"])
		}
	}
	if c.Rank() == 0 && err == nil {
		return json.NewEncoder(os.Stdout).Encode(secs)
	}
	return err
}

// The mem section: the peak memory of a GRPO step against its analytic size (grpo.Plan's
// footprint). Each case runs in a child process (rookbench -mem-case), so that nothing the
// parent holds counts: it sets up, returns what setup left to the system, resets its peak
// (VmHWM) and runs its steps.

type memResult struct {
	Peak      int64          `json:"peak_bytes"` // VmHWM over the steps
	Footprint gpt2.Footprint `json:"footprint"`
	Shape     string         `json:"shape"`
}

// The main job's shapes (recipes/grpo_stable.lua; RookWorld prompts run 40 to 110 tokens).
const (
	mainPrompts, mainGroup, mainPromptLen, mainNew, mainEvalSize = 8, 8, 96, 72, 256
	smallSpec                                                    = "random:small@seed=1"
)

var memCases = []struct{ key, name string }{
	{"grpo_default", "GRPO step of the main job on the default model's architecture"},
	{"grpo_124m", "GRPO step of GPT-2 124M (the grpo section's shapes)"},
}

// runMemCase runs a case in this process and prints its result as JSON.
func runMemCase(name string, threads int) (err error) {
	var r memResult
	switch name {
	case "grpo_default": // at the micro-batch the main recipe plans here: its bounds, half the RAM
		var ram int64
		if ram, err = procmem.RAM(); err == nil {
			p := grpo.Plan{Model: gpt2.RandomConfigs["small"], Budget: ram / 2, Prompts: mainPrompts, Group: mainGroup,
				PromptLen: rookworld.MaxPromptTokens, NewTokens: mainNew, Minibatches: 1, Reference: true,
				EvalSlots: mainEvalSize, EvalNewTokens: rookworld.MaxAnswerTokens}
			micro, _, _ := p.MicroBatch()
			r, err = grpoMem(smallSpec, threads, mainPrompts, mainGroup, mainPromptLen, mainNew, micro, 2)
		}
	case "grpo_124m":
		r, err = grpoMem(modelSpec, threads, genPrompts, genGroup, genPromptLen, genNew, 16, 1)
	default:
		err = fmt.Errorf("-mem-case: no case %q", name)
	}
	return cmp.Or(err, json.NewEncoder(os.Stdout).Encode(r))
}

// grpoMem sets up a GRPO run, ends setup (memory returned, the peak reset) and takes steps
// steps, its peak read after them.
func grpoMem(spec string, threads, prompts, group, promptLen, newTokens, micro, steps int) (memResult, error) {
	var r memResult
	policy, err := newModel(nil, spec, threads)
	if err != nil {
		return r, err
	}
	step, err := grpoStepper(policy, 1e-6, randomPrompts(prompts, promptLen, policy.Config.VocabSize, 5),
		group, newTokens, micro, nil)
	debug.FreeOSMemory() // a collection first
	err = cmp.Or(err, procmem.ResetPeak())
	longest := 0
	for i := 0; i < steps && err == nil; i++ {
		_, _, err = step(i, func(b *rollout.Batch) {
			for _, c := range b.Completions {
				longest = max(longest, len(c.Tokens))
			}
		})
	}
	if err == nil {
		r.Peak, err = procmem.Peak()
	}
	r.Footprint = grpo.Plan{Model: policy.Config, Prompts: prompts, Group: group, PromptLen: promptLen,
		NewTokens: longest, Minibatches: 1, Reference: true, EvalSlots: prompts * group, EvalNewTokens: newTokens,
	}.Footprint(micro)
	r.Shape = fmt.Sprintf("%s, %d prompts × group %d, %d-token prompts, ≤%d new tokens (longest %d), "+
		"micro-batches of %d, β > 0", spec, prompts, group, promptLen, newTokens, longest, micro)
	return r, err
}

// runMem runs each case in a child process and adds its rows.
func (b *bench) runMem() {
	progress("== peak memory against the analytic size, each case in a child process")
	group := "Peak resident memory against the analytic size (target: within 1.3x)"
	mb := func(v int64) series { return measured([]float64{float64(v) / 1e6}) }
	self, _ := os.Executable()
	for _, c := range memCases {
		var r memResult
		err := runChild(exec.Command(self, "-mem-case", c.key, "-threads", strconv.Itoa(b.threads)), &r)
		if err != nil {
			b.add(valueRow(group, "mem."+c.key+"_peak", c.name, "MB", b.failure("mem "+c.key, err)))
			continue
		}
		row := valueRow(group, "mem."+c.key+"_peak", c.name+": peak RSS over the steps", "MB", mb(r.Peak))
		row.Note = r.Shape
		b.add(row)
		total := mb(r.Footprint.Total())
		note := fmt.Sprintf("analytic %.0f MB: %s", total.v[0], r.Footprint)
		b.add(ratioRow(group, "mem."+c.key+"_ratio", "  peak / analytic size", note, mb(r.Peak), total, false))
	}
}

// runChild runs cmd for the JSON it prints, into v; its error ends with the end of its stderr.
func runChild(cmd *exec.Cmd, v any) error {
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(cmd.Path), err, lastLines(errb.String(), 3))
	}
	return json.Unmarshal(out, v)
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], " | ")
}

// peerTimeout bounds one peer process.
const peerTimeout = 20 * time.Minute

// torchInfo is the ready line a PyTorch script prints in --serve mode.
type torchInfo struct {
	Ready         bool    `json:"ready"`
	Torch         string  `json:"torch"`
	OMPWaitPolicy string  `json:"omp_wait_policy"`
	CoreType      string  `json:"openblas_coretype"` // OPENBLAS_CORETYPE as the process saw it
	BLASCore      string  `json:"blas_core"`         // the family whose kernels its OpenBLAS runs
	Capability    string  `json:"cpu_capability"`    // the kernels torch's own operators run
	OneDNNISA     string  `json:"onednn_isa"`
	InitS         float64 `json:"init_s"`
}

// peerEnv is base with set's variables after it (exec.Cmd runs a key's last value), and huge
// pages for large blocks of glibc's malloc, as cpu.HostFloats advises them for the engine's.
func peerEnv(base []string, set ...string) []string {
	return append(append(slices.Clone(base), set...), "GLIBC_TUNABLES=glibc.malloc.hugetlb=1")
}

// torchEnv is the environment of a PyTorch peer at its best here: OMP_WAIT_POLICY=PASSIVE
// (Debian's torch otherwise keeps its OpenMP threads spinning between parallel regions, against
// its own BLAS threads), OpenBLAS on the family coreType, and where the engine is capped at
// AVX2, its operators and oneDNN capped too (torch reads its capability in lower case only).
func torchEnv(base []string, coreType string, capped bool) []string {
	set := []string{"OMP_WAIT_POLICY=PASSIVE", "OPENBLAS_CORETYPE=" + coreType}
	if capped {
		set = append(set, "ATEN_CPU_CAPABILITY=avx2", "ONEDNN_MAX_CPU_ISA=AVX2")
	}
	return peerEnv(base, set...)
}

// torchProc is a PyTorch script in --serve mode: it builds its model once, then times one op
// per request, so that its runs alternate with the engine's.
type torchProc struct {
	Info   torchInfo
	name   string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr bytes.Buffer
	close  sync.Once
}

// startTorch starts one of the bench's PyTorch scripts as a peer, its OpenBLAS on the family
// torchFamily chooses; the first one started says what the peer's kernels are.
func (b *bench) startTorch(script string, args ...string) (*torchProc, error) {
	if b.torchFam == "" {
		if err := b.torchFamily(cpu.BLASFamilies()); err != nil {
			return nil, err
		}
	}
	p, err := b.spawnTorch(script, b.torchFam, args...)
	if err == nil && b.peer == nil {
		b.peer = &p.Info
	}
	return p, err
}

// torchFamily chooses the peers' OpenBLAS family: torch_gpt2.py's forward under each family of
// fams (those the processor runs), their processes' runs alternated, three after a warm-up;
// the fastest median's wins. Without families, the engine's.
func (b *bench) torchFamily(fams []string) error {
	b.torchFam, b.torchWhy = cpu.BLASCoreName(), "the engine's: the processor runs no family of AVX2 or wider"
	var cs []*contender
	for _, f := range fams {
		p, err := b.spawnTorch("torch_gpt2.py", f, "--batch", fmt.Sprint(b.batch), "--seq", fmt.Sprint(b.seq))
		c := &contender{name: f, err: err}
		if err == nil {
			defer p.Close()
			c.run = func() (sample, error) { return p.Do("forward") }
		}
		cs = append(cs, c)
	}
	alternate("torch forward by OpenBLAS family", 1, 3, cs...)
	if i := fastestMedian(cs, func(s sample) float64 { return -s.ms }); i >= 0 {
		var all []string
		for _, c := range cs {
			if c.err == nil {
				all = append(all, fmt.Sprintf("%s %.1f ms", c.name, c.series(wallMS).median()))
			}
		}
		b.torchFam, b.torchWhy = fams[i], "the fastest forward of OPENBLAS_CORETYPE="+strings.Join(all, ", ")
	} else if len(cs) > 0 {
		return cs[0].err
	}
	return nil
}

// spawnTorch starts script in --serve mode, its OpenBLAS on family, on the bench's threads and
// seed, and waits for its ready line; its stderr passes through.
func (b *bench) spawnTorch(script, family string, args ...string) (*torchProc, error) {
	script = filepath.Join(b.scripts, script)
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	p := &torchProc{name: filepath.Base(script), cancel: cancel}
	args = append([]string{script, "--serve", "--threads", fmt.Sprint(b.threads), "--seed", "42"}, args...)
	p.cmd = exec.CommandContext(ctx, b.python, args...)
	p.cmd.Env = torchEnv(os.Environ(), family, cpu.Capped())
	p.cmd.Stderr = io.MultiWriter(os.Stderr, &p.stderr)
	in, err := p.cmd.StdinPipe()
	out, err2 := p.cmd.StdoutPipe()
	if err = cmp.Or(err, err2, p.cmd.Start()); err != nil {
		cancel()
		return nil, err
	}
	p.in, p.out = in, bufio.NewScanner(out)
	line, err := p.readLine()
	if err = cmp.Or(err, json.Unmarshal(line, &p.Info)); err == nil && !p.Info.Ready {
		err = errors.New("no ready line")
	}
	if err != nil {
		return nil, p.failure(err)
	}
	progress("  torch %s: OpenBLAS %s, operators %s, ready in %.1f s", p.Info.Torch, p.Info.BLASCore,
		p.Info.Capability, p.Info.InitS)
	return p, nil
}

// readLine is the script's next stdout line that looks like JSON (libraries print there too).
func (p *torchProc) readLine() ([]byte, error) {
	for p.out.Scan() {
		if line := bytes.TrimSpace(p.out.Bytes()); len(line) > 0 && line[0] == '{' {
			return line, nil
		}
	}
	return nil, cmp.Or(p.out.Err(), io.ErrUnexpectedEOF)
}

// failure ends the process and says why it could not answer, with the end of its stderr.
func (p *torchProc) failure(err error) error {
	p.Close()
	if msg := p.stderr.String(); strings.Contains(msg, "No module named 'torch'") {
		return fmt.Errorf("%s has no torch (run make setup-bench, or pass -python)", p.cmd.Path)
	}
	return fmt.Errorf("%s: %v: %s", p.name, err, lastLines(p.stderr.String(), 1))
}

// Do times one op in the script.
func (p *torchProc) Do(op string) (sample, error) {
	var r struct {
		Error   string  `json:"error"`
		MS      float64 `json:"ms"`
		Prefill float64 `json:"prefill_ms"`
		Decode  float64 `json:"decode_ms"`
	}
	_, err := fmt.Fprintln(p.in, op)
	line, err2 := p.readLine()
	if err = cmp.Or(err, err2); err != nil {
		return sample{}, p.failure(err)
	}
	if err := json.Unmarshal(line, &r); err != nil || r.Error != "" {
		return sample{}, fmt.Errorf("%s: %s", p.name, cmp.Or(r.Error, fmt.Sprintf("bad reply %q: %v", line, err)))
	}
	return sample{ms: r.MS, prefill: r.Prefill, decode: r.Decode}, nil
}

// Close ends the script (the end of its stdin) and waits for it.
func (p *torchProc) Close() {
	p.close.Do(func() {
		p.in.Close()
		p.cmd.Wait()
		p.cancel()
	})
}

// llmcStep matches llm.c's step lines ("step N: train loss L (took T ms)"): T is the step's time.
var llmcStep = regexp.MustCompile(`^step\s+\d+: train loss \S+ \(took ([0-9.eE+-]+) ms\)`)

// llmcStepMS reads llm.c's output until it has warmup+runs steps and returns the last runs'.
func llmcStepMS(r io.Reader, warmup, runs int) ([]float64, error) {
	var ms []float64
	for sc, seen := bufio.NewScanner(r), 0; sc.Scan(); {
		if m := llmcStep.FindStringSubmatch(strings.TrimSpace(sc.Text())); m != nil {
			if seen++; seen > warmup {
				v, _ := strconv.ParseFloat(m[1], 64)
				ms = append(ms, v)
				progress("  llm.c train step %d/%d: %.1f ms", len(ms), runs, v)
			}
			if len(ms) == runs {
				return ms, nil
			}
		}
	}
	return ms, fmt.Errorf("llm.c stopped after %d train steps, wanted %d", len(ms)+warmup, warmup+runs)
}

// runLLMC runs llm.c's CPU trainer (train_gpt2 in dir, B=4 T=64) with OMP_NUM_THREADS=threads,
// takes the step times it prints (forward, backward, AdamW) and stops it once it has them.
func runLLMC(dir string, threads, warmup, runs int) (series, error) {
	bin := filepath.Join(dir, "train_gpt2")
	fi, err := os.Stat(bin)
	_, err2 := os.Stat(filepath.Join(dir, "gpt2_124M.bin"))
	if dir == "" || err != nil || fi.Mode()&0o111 == 0 || err2 != nil {
		return skipped("LLMC_DIR names no llm.c checkout with train_gpt2 built and gpt2_124M.bin " +
			"(rookbench does not download or build it)"), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	if sb, err := exec.LookPath("stdbuf"); err == nil { // stdio buffers a pipe: line-buffer it
		cmd = exec.CommandContext(ctx, sb, "-oL", bin)
	}
	var stderr bytes.Buffer
	cmd.Dir, cmd.Stderr = dir, &stderr
	cmd.Env = peerEnv(os.Environ(), "OMP_NUM_THREADS="+strconv.Itoa(threads))
	out, err := cmd.StdoutPipe()
	if err = cmp.Or(err, cmd.Start()); err != nil {
		return series{}, err
	}
	ms, err := llmcStepMS(out, warmup, runs)
	cmd.Process.Kill() // it would go on for its 40 steps
	if cmd.Wait(); err != nil {
		return series{}, fmt.Errorf("%v: %s", cmp.Or(ctx.Err(), err), lastLines(stderr.String(), 1))
	}
	return measured(ms), nil
}
