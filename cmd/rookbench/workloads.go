package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/dist"
	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/optim"
	"github.com/rookscript/rookscript/engine/rollout"
)

// newModel builds a model of spec (a random one, by name) on be.
func newModel(be backend.Backend, spec string) (*gpt2.Model, error) {
	t := time.Now()
	cfg, params, src, err := gpt2.Load(spec)
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
		b.model, err = newModel(be, modelSpec)
	}
	return err
}

// engineSteps are the engine's forward (LM head and log-softmax on every row) and its train
// step as it trains (ZeroGrads, ForwardBackward of the mean cross-entropy, AdamW) on bsz
// random sequences of t tokens, each run once outside any measurement to touch every buffer.
func engineSteps(m *gpt2.Model, bsz, t int) (fwd, train func() error, err error) {
	batch, out := &gpt2.Batch{}, &gpt2.Output{}
	for _, s := range randomPrompts(bsz, t+1, m.Config.VocabSize, 2) {
		batch.Add(s[:t], 0)
		batch.Rows, batch.Targets = append(batch.Rows, int32(len(batch.Tokens)-1)), append(batch.Targets, s[t])
	}
	opt, err := optim.NewAdamW(m, optim.DefaultAdamW())
	w := -1 / float32(len(batch.Rows))
	fwd = func() error { return m.Forward(batch, 1, false, out) }
	train = func() error {
		m.ZeroGrads()
		err := m.ForwardBackward(batch, 1, false, func(_ int, _, _, dlogp, _ []float32) {
			for i := range dlogp {
				dlogp[i] = w
			}
		}, out)
		opt.Step(1e-4)
		finishBuf(m.B, m.Params)
		return err
	}
	if err == nil {
		err = cmp.Or(fwd(), train())
	}
	return fwd, train, err
}

// runSteps alternates the engine's and PyTorch's forward, then their train steps, each beside
// the floor rates' samples. The floor is the weight products at the GEMM rate: once for the
// forward, three times (forward and backward) for the train step.
func (b *bench) runSteps() {
	progress("== GPT-2 124M forward and train step, B=%d T=%d", b.batch, b.seq)
	cfg, rows := gpt2.RookWorld124M, b.batch*b.seq
	var steps [2]func() error
	var torch *torchProc
	var engErr, torErr error
	if b.sel["engine"] {
		if engErr = b.loadModel(); engErr == nil {
			steps[0], steps[1], engErr = engineSteps(b.model, b.batch, b.seq)
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
		passes         float64
	}{
		{"forward", "forward", fmt.Sprintf("forward, LM head + log-softmax on all %d rows", rows), 1},
		{"train_step", "train", "train step as the engine trains (ZeroGrads, ForwardBackward, AdamW)", 3},
	} {
		group := fmt.Sprintf("GPT-2 124M %s, B=%d T=%d", w.title, b.batch, b.seq)
		eng, peer := &contender{name: "engine", err: engErr}, &contender{name: "torch", err: torErr}
		if step := steps[i]; step != nil {
			eng.run = func() (sample, error) { return sample{}, step() }
		}
		if torch != nil {
			peer.run = func() (sample, error) { return torch.Do(w.op) }
		}
		r := b.measure(group, w.key, b.runs, 1, eng, peer)
		floor := r.ms(phase{flop: w.passes * 2 * weights(cfg, true) * float64(rows)})
		b.versus(group, w.key, "torch", eng, peer, wallMS, "ms", floor)
		if w.key == "train_step" {
			b.train = eng.series(wallMS)
		}
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

// gen8Repeat is how often the 8-row generation and the floor rates' samples run in a round of
// the generation section: an 8-row generation is far shorter than a 64-row one, and a floor's
// best rate needs samples enough to miss the moments another process slowed.
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

// greedy is KV-cache generation through the model's own calls: Prefill of the first nPrompts
// prompts (one slot each), ShareSlot with the group's other slots, then genNew DecodeLogits
// steps, the next token the argmax of the logits (no softmax: torch's greedy loop takes none).
// A run's sample has its prefill (shares included) and decode ms.
func greedy(m *gpt2.Model, threads, nPrompts, group int) (func() (sample, error), error) {
	seqs, v := nPrompts*group, m.Config.VocabSize
	kv, err := m.NewKVCache(seqs, genPromptLen+genNew)
	var prompts gpt2.Batch
	var promptSlots []int32
	first, tokens := make([]int32, nPrompts), make([]int32, seqs)
	slots, pos := make([]int32, seqs), make([]int32, seqs)
	for p, s := range genPromptTokens(v)[:nPrompts] {
		prompts.Add(s, len(s))
		promptSlots = append(promptSlots, int32(p*group))
	}
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
			logits, err := m.DecodeLogits(kv, tokens, slots, pos)
			if err != nil {
				return sample{}, err
			}
			argmaxRows(tokens, logits, v, threads)
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
	progress("== KV-cache generation, %d×%d sequences, %d-token prompts, %d new tokens",
		genPrompts, genGroup, genPromptLen, genNew)
	cfg, seqs := gpt2.RookWorld124M, genPrompts*genGroup
	group := fmt.Sprintf("Greedy KV-cache generation: %d prompts × %d samples, %d-token prompts, %d steps",
		genPrompts, genGroup, genPromptLen, genNew)
	eng := &contender{name: fmt.Sprintf("engine, %d rows (+ argmax)", seqs)}
	eng8 := &contender{name: fmt.Sprintf("engine, %d rows of 1 prompt", genGroup), repeat: gen8Repeat}
	peer := &contender{name: fmt.Sprintf("torch, static cache, %d rows", seqs)}
	if b.sel["gen"] {
		err := b.loadModel()
		if err == nil {
			eng.run, err = greedy(b.model, b.threads, genPrompts, genGroup)
		}
		if err == nil {
			eng8.run, err = greedy(b.model, b.threads, 1, genGroup)
		}
		eng.err, eng8.err = err, err
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
	// A step reads each prompt's cached positions once (its samples share them), then each row's own.
	meanCtx := float64(genPromptLen) + float64(genNew+1)/2
	cached := func(rows, prompts int) float64 {
		return float64(prompts*genPromptLen) + float64(rows)*(meanCtx-genPromptLen)
	}
	decode := func(s sample) float64 { return s.decode / genNew }
	b.versus(group, "gen_decode_step", "torch", eng, peer, decode, "ms",
		r.ms(decodeWork(cfg, seqs, cached(seqs, genPrompts))...))
	if b.sel["gen"] {
		floor := r.ms(decodeWork(cfg, genGroup, cached(genGroup, 1))...)
		b.add(valueRow(group, "engine.gen_decode_step_8", eng8.name, "ms", b.record(eng8, decode), floor))
		head := weights(cfg, true) - weights(cfg, false)
		floor = r.ms(phase{flop: 2 * (weights(cfg, false)*genPrompts*genPromptLen + head*genPrompts)})
		name := fmt.Sprintf("engine Prefill %d×%d, shared with %d slots", genPrompts, genPromptLen, seqs)
		prefill := eng.series(func(s sample) float64 { return s.prefill })
		b.add(valueRow(group, "engine.gen_prefill", name, "ms", prefill, floor))
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
	floors := make([][]float64, len(phases))
	for _, w := range batches {
		roll, f := grpoWork(b.model.Config, w)
		ph := []float64{r.ms(roll...) / 1e3, r.ms(f) / 1e3, 3 * r.ms(f) / 1e3}
		for k, v := range append(ph, ph[0]+ph[1]+ph[2]) {
			floors[k] = append(floors[k], v)
		}
	}
	for k, p := range phases {
		b.add(valueRow(group, "engine.grpo_"+p.key+"_s", p.name, "s", measured(got[k]), floors[k]...))
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
		steps[n] = skipped(fmt.Sprint(err))
		if err == nil {
			out, e := runChild(exec.Command(mpirun, args...))
			var s []float64
			if e = cmp.Or(e, json.Unmarshal(out, &s)); e != nil {
				steps[n] = b.failure("dp", fmt.Errorf("%d ranks: %w", n, e))
			} else {
				steps[n] = measured(s)
			}
		}
		name := fmt.Sprintf("step on %d rank(s)", n)
		b.add(valueRow(group, fmt.Sprintf("engine.dp_step_%d_ranks_s", n), name, "s", steps[n]))
	}
	b.add(ratioRow(group, "engine.dp_speedup_2", "  speed-up on 2 ranks", "ideal 2", steps[1], steps[2], false))
}

// dpChild is one rank of the dp section: warm-up, then timed GRPO steps on its share of the
// prompts; rank 0 prints the steps' seconds as JSON.
func dpChild(runs, warmup int) error {
	runtime.GOMAXPROCS(1)
	c, err := dist.Open()
	if err != nil {
		return err
	}
	defer c.Close()
	m, err := cpuModel(smallSpec, 1)
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
	for i := range warmup + runs {
		if err != nil {
			return err
		}
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
