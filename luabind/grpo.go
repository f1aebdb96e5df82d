package luabind

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/grpo"
	"github.com/rookscript/rookscript/engine/rollout"
	"github.com/rookscript/rookscript/engine/rookworld"
)

// trainerState is the GRPO trainer of a policy, kept across steps for its scratch buffers
// and its warn-once memory.
type trainerState struct{ tr *grpo.Trainer }

// rook.grpo.defaults([{trl_compat = true}]) → the step's default options under their
// canonical names (TRL's defaults and conventions with trl_compat).
func luaGRPODefaults(L *lua.LState) int {
	c, err := sectionNamed("grpo").read(L.Get(1), "")
	if err != nil {
		L.RaiseError("rook.grpo.defaults: %s", err.Error())
	}
	L.Push(fromGo(L, record(c)))
	return 1
}

// rook.grpo.step(policy, ref, opt, batch [, opts]) → metrics table. ref may be nil when
// beta = 0 (the reference is then never run). Each update runs at the optimizer's scheduled
// learning rate. metrics.finite is a boolean: false when an update was skipped for a
// non-finite loss or gradient.
func (e *Env) luaGRPOStep(L *lua.LState) int {
	p := checkModel(L, 1)
	var ref *model
	if L.Get(2) != lua.LNil {
		ref = checkModel(L, 2)
		if !ref.frozen {
			L.ArgError(2, "the reference must be a frozen copy (policy:reference())")
		}
		if ref.m.Config != p.m.Config {
			L.ArgError(2, "the reference's architecture differs from the policy's")
		}
	}
	checkRunReference(L, p, ref)
	opt := checkAdam(L, 3)
	if opt.model != p {
		L.ArgError(3, "this optimizer belongs to another model")
	}
	b := checkBatch(L, 4)
	cfg := settingsArg[grpo.Config](L, 5, "grpo", "rook.grpo.step")
	if cfg.Beta > 0 && ref == nil {
		L.ArgError(2, "beta > 0 needs a reference model")
	}
	if p.frozen {
		L.ArgError(1, "the policy is a frozen reference")
	}
	tr := e.trainerOf(p)
	tr.Opt, tr.Ref, tr.RefHash = opt.o, nil, ""
	if ref != nil {
		// The trainer checks the weights themselves against the recorded hash (checkRunReference
		// checked the reference's label), hashing them again only after a write.
		tr.Ref, tr.RefHash = ref.m, ref.hash
		if p.run != nil {
			tr.RefHash = p.run.identity.Current()
		}
	}
	tr.Hooks.AfterBackward = nil
	if p.faultNaN {
		p.faultNaN = false
		tr.Hooks.AfterBackward = poisonGradient
	}
	m, err := tr.Step(L.Context(), b.b, cfg)
	b.tokenAdv = nil // the step set its own advantages, per completion
	if off := (*grpo.OffPolicyError)(nil); errors.As(err, &off) && p.run != nil {
		err = fmt.Errorf("step %d of the run in %s: %w", p.run.step+1, p.run.r.Dir, err)
	}
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	t := metricsTable(L, m)
	if why := tr.NoSignal; why != "" {
		t.RawSetString("no_signal_reason", lua.LString(why)) // a string: run:log shows it, metrics.jsonl keeps numbers
	}
	L.Push(t)
	return 1
}

// trainerOf is policy p's GRPO trainer, made on first use: rook.grpo.step and the primitives
// share it, and with it the gradient forward_backward accumulates.
func (e *Env) trainerOf(p *model) *grpo.Trainer {
	if p.trainer == nil {
		p.trainer = &trainerState{tr: &grpo.Trainer{Policy: p.m}}
	}
	tr := p.trainer.tr
	tr.Warn = func(msg string) {
		if !e.opts.Quiet {
			e.say("warning: rook.grpo.step: " + strings.TrimPrefix(msg, "grpo: ")) // only the step warns
		}
	}
	if c := e.world(); c.Size() > 1 {
		tr.Comm = c // the ranks' shares of the batch step together
	}
	return tr
}

// rook.grpo.plan(policy, {prompts=, rollout=, grpo=, eval_size=0, eval=, budget=}) → the
// micro-batch plan of a GRPO run of policy within a memory budget (rook.memory.budget's spec),
// as grpo.Plan counts it: prompts per step, the rollout's group and max_new_tokens (a table or
// a rollout section), the step's minibatches and β (a reference scores every micro-batch when
// β > 0), and an evaluation of eval_size prompts decoded at once with eval's max_new_tokens.
// Returns {micro_batch=, seq_len=, bytes=, budget=, parts={...}, text=}: the completions
// per micro-batch (grpo's micro_batch) and what the run holds with them. A run over the
// budget is a config error, raised before any work.
func luaGRPOPlan(L *lua.LState) int {
	seqs, sequences, seqLen, f, budget, _ := grpoPlan(L, L.Get(2))
	return pushPlan(L, seqs, sequences, seqLen, f, budget)
}

// grpoPlan is rook.grpo.plan on an option table; configured is the recipe's own micro_batch
// (0: the planned one).
func grpoPlan(L *lua.LState, opts lua.LValue) (seqs, sequences, seqLen int, f gpt2.Footprint, budget int64, configured int) {
	m := checkModel(L, 1)
	o := struct {
		Budget   lua.LValue     `json:"budget"`
		Prompts  int            `json:"prompts"`
		EvalSize int            `json:"eval_size"`
		Rollout  rollout.Config `json:"rollout"`
		GRPO     grpo.Config    `json:"grpo"`
		Eval     evalOptions    `json:"eval"`
	}{Rollout: defaultsOf[rollout.Config]("rollout"), GRPO: defaultsOf[grpo.Config]("grpo"), Eval: defaultsOf[evalOptions]("eval")}
	L.Push(opts)
	options(L, L.GetTop(), "rook.grpo.plan", &o)
	L.Pop(1)
	budget, err := budgetBytes(o.Budget)
	p := grpo.Plan{Model: m.m.Config, Budget: budget, Prompts: o.Prompts, Group: o.Rollout.Group,
		PromptLen: rookworld.MaxPromptTokens, NewTokens: o.Rollout.MaxNewTokens, Minibatches: o.GRPO.Minibatches,
		Reference: o.GRPO.Beta > 0, EvalSlots: max(o.EvalSize, 0), EvalNewTokens: o.Eval.MaxNewTokens}
	if err == nil {
		err = p.Validate()
	}
	if err != nil {
		raiseConfigf(L, "rook.grpo.plan: %v", err) // the config's shapes: no traceback
	}
	seqs, f, fits := p.MicroBatch()
	if mb := o.GRPO.MicroBatch; mb > 0 { // the recipe's own micro-batch must fit too
		seqs, f = mb, p.Footprint(mb)
		fits = f.Total() <= budget
	}
	if !fits {
		raiseConfigf(L, "rook.grpo.plan: the run needs %s with micro-batches of %d, over its %s budget (%s): lower prompts (%d), rollout.group (%d), rollout.max_new_tokens (%d), eval_size (%d) or grpo.micro_batch, or raise the budget (mem_budget)",
			humanize.Bytes(uint64(f.Total())), seqs, humanize.Bytes(uint64(budget)), f, o.Prompts, o.Rollout.Group, o.Rollout.MaxNewTokens, o.EvalSize)
	}
	return seqs, p.Sequences(), p.SeqLen(), f, budget, max(o.GRPO.MicroBatch, 0)
}

// rook.grpo.apply_plan(policy, cfg) → plan: rook.grpo.plan for a run's config (rook.config's
// table: its mem_budget, prompts, eval_size, rollout and grpo), applied. cfg.grpo.micro_batch
// becomes the planned one unless the config set it, the heap's soft limit becomes the plan's
// bytes (rook.memory.limit: the collector keeps the heap near the plan), and the plan is logged.
func (e *Env) luaGRPOApplyPlan(L *lua.LState) int {
	cfg := L.CheckTable(2)
	opts := L.NewTable()
	for _, k := range [][2]string{{"budget", "mem_budget"}, {"prompts", "prompts"}, {"eval_size", "eval_size"},
		{"rollout", "rollout"}, {"grpo", "grpo"}} {
		opts.RawSetString(k[0], L.GetField(cfg, k[1]))
	}
	seqs, sequences, seqLen, f, budget, configured := grpoPlan(L, opts)
	how := ""
	if configured > 0 {
		how = fmt.Sprintf("; micro_batch=%d as configured", configured)
	} else if g, ok := L.GetField(cfg, "grpo").(*lua.LTable); ok {
		L.SetField(g, "micro_batch", lua.LNumber(seqs))
	} else {
		raiseConfigf(L, "rook.grpo.apply_plan: cfg.grpo is not a section table")
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(f.Total())
	}
	n := pushPlan(L, seqs, sequences, seqLen, f, budget)
	if !e.opts.Quiet {
		text := lua.LVAsString(L.GetField(L.Get(-1), "text"))
		e.say(time.Now().Format("15:04:05") + " memory: " + text + how)
	}
	return n
}

// rook.debug.inject_nan(policy) makes the policy's next GRPO step find a NaN in its
// gradient (fault drills and tests of recovery policies).
func luaInjectNaN(L *lua.LState) int {
	checkModel(L, 1).faultNaN = true
	return 0
}

// poisonGradient writes a NaN into one gradient element.
func poisonGradient(m *gpt2.Model) {
	g, _ := m.Grad("ln_f.bias")
	m.B.Upload(g.Slice(0, 1), []float32{float32(nan())})
}

// metricsTable converts step metrics to Lua: numbers, except "finite" which is a boolean.
func metricsTable(L *lua.LState, m map[string]float64) *lua.LTable {
	t := L.CreateTable(0, len(m))
	for k, v := range m {
		if k == "finite" {
			t.RawSetString(k, lua.LBool(v != 0))
			continue
		}
		t.RawSetString(k, lua.LNumber(v))
	}
	return t
}
