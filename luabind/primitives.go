package luabind

import (
	"errors"
	"fmt"
	"math"
	"slices"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/grpo"
)

// The step as primitives (engine/grpo/pass.go), in the shape of Tinker's API: advantages set
// on the batch (batch:set_advantages, rook.grpo.advantages), policy:forward_backward with a
// built-in loss or a Lua function, opt:step, policy:zero_grad, model:score. rook.grpo.step is
// these composed, in Go, over the same engine calls.

// refScores are a batch's per-token log-probabilities under a reference, at one generation
// of its weights.
type refScores struct {
	m    *gpt2.Model
	gen  uint64
	logp [][]float32
}

// forwardBackwardOptions are policy:forward_backward's options beside the grpo settings.
type forwardBackwardOptions struct {
	Ref          *model            `json:"ref"`
	Minibatch    int               `json:"minibatch"`
	Entropy      bool              `json:"entropy"`
	TokenLevel   bool              `json:"token_level"`
	LossFnConfig grpo.TinkerConfig `json:"loss_fn_config"`
}

// policy:forward_backward(batch, loss [, settings [, opts]]) → metrics: one minibatch's
// forward, loss and backward; the gradient accumulates until opt:step.
func (e *Env) modelForwardBackward(L *lua.LState) int {
	p := checkModel(L, 1)
	if p.frozen {
		L.ArgError(1, "a reference is frozen: it has no gradient")
	}
	b := checkBatch(L, 2)
	cfg := settingsArg[grpo.Config](L, 4, "grpo", "policy:forward_backward")
	o := forwardBackwardOptions{Minibatch: 1, LossFnConfig: grpo.DefaultTinkerConfig()}
	options(L, 5, "policy:forward_backward", &o)
	loss := grpo.Loss{Tinker: o.LossFnConfig, Entropy: o.Entropy, TokenLevel: o.TokenLevel}
	switch v := L.Get(3).(type) {
	case lua.LString:
		loss.Name = string(v)
		if v == "step" { // rook.grpo.step's loss: the settings' loss_type (cispo there is TRL's)
			loss.Name, loss.Step = string(cfg.LossType), true
		}
		if o.Entropy || o.TokenLevel {
			L.ArgError(5, "entropy and token_level are for a loss written in Lua (the built-in losses read what their settings say)")
		}
	case *lua.LFunction:
		loss.Name, loss.Func = functionName(L, v), e.luaLoss(L, v)
	default:
		L.ArgError(3, "a loss name or a function expected, got "+describe(v))
	}
	tr := e.trainerOf(p)
	pass := grpo.Pass{Batch: b.b, TokenAdv: b.tokenAdv, Config: cfg, Minibatch: o.Minibatch - 1, Loss: loss}
	if o.Ref != nil {
		pass.RefLogp = e.referenceScores(L, p, o.Ref, b, cfg.MicroBatch)
	}
	m, err := tr.ForwardBackward(L.Context(), pass)
	if off := (*grpo.OffPolicyError)(nil); errors.As(err, &off) && p.run != nil {
		err = fmt.Errorf("step %d of the run in %s: %w", p.run.step+1, p.run.r.Dir, err)
	}
	if err != nil {
		L.RaiseError("policy:forward_backward: %s", err.Error())
	}
	t := metricsTable(L, m)
	if _, nf := tr.Accumulated(); nf != nil {
		t.RawSetString("nonfinite", lua.LString(nonFiniteText(nf)))
	}
	L.Push(t)
	return 1
}

// nonFiniteText says where a Lua loss gave a value that is not finite, counting from 1.
func nonFiniteText(nf *grpo.NonFinite) string {
	if nf.Token < 0 {
		return fmt.Sprintf("the loss of the call from completion %d is %v", nf.Completion+1, nf.Value)
	}
	return fmt.Sprintf("completion %d token %d: %s is %v", nf.Completion+1, nf.Token+1, nf.What, nf.Value)
}

// referenceScores are b's log-probabilities under ref, for a pass of policy p: ref checked as
// rook.grpo.step checks its reference, scored once per batch and weights.
func (e *Env) referenceScores(L *lua.LState, p, ref *model, b *batch, microBatch int) [][]float32 {
	if !ref.frozen {
		L.RaiseError("policy:forward_backward: opts.ref must be a frozen copy (policy:reference())")
	}
	if ref.m.Config != p.m.Config {
		L.RaiseError("policy:forward_backward: the reference's architecture differs from the policy's")
	}
	if p.run != nil && ref.hash != p.run.identity.Current() {
		L.RaiseError("policy:forward_backward: the reference (%s) is not run %s's recorded KL reference: after a resume use run.ref", ref.label(), p.run.r.Dir)
	}
	tr := e.trainerOf(p)
	tr.Ref, tr.RefHash = ref.m, ref.hash
	if p.run != nil {
		tr.RefHash = p.run.identity.Current()
	}
	if err := tr.CheckReference(); err != nil {
		L.RaiseError("policy:forward_backward: %s", err.Error())
	}
	if c := b.ref; c != nil && c.m == ref.m && c.gen == ref.m.ParamGeneration() {
		return c.logp
	}
	logp, _, err := grpo.Score(L.Context(), ref.m, b.b, microBatch, false)
	if err != nil {
		L.RaiseError("policy:forward_backward: reference forward: %s", err.Error())
	}
	b.ref = &refScores{m: ref.m, gen: ref.m.ParamGeneration(), logp: logp}
	return logp
}

// opt:step([settings]) → metrics: applies what forward_backward accumulated, clipped to the
// grpo settings' max_grad_norm.
func (e *Env) adamStep(L *lua.LState) int {
	a := checkAdam(L, 1)
	o := settingsArg[grpo.Config](L, 2, "grpo", "adamw:step") // its max_grad_norm
	tr := e.trainerOf(a.model)
	tr.Opt = a.o
	tr.Hooks.AfterBackward = nil
	if a.model.faultNaN {
		a.model.faultNaN = false
		tr.Hooks.AfterBackward = poisonGradient
	}
	up, err := tr.OptimStep(o.MaxGradNorm)
	if err != nil {
		L.RaiseError("adamw:step: %s", err.Error())
	}
	m := map[string]float64{"lr": up.LR, "passes": float64(up.Passes), "updates": 0, "skipped": 0, "finite": 1}
	switch {
	case up.Applied:
		m["updates"], m["grad_norm"] = 1, up.Norms.Total
		for k, v := range up.Norms.Named {
			m["grad_norm/"+k] = v
		}
	case up.NoSignal:
		m["no_signal"] = 1
	default:
		m["skipped"], m["finite"] = 1, 0
		if up.NonFiniteGrad {
			m["nonfinite_grad"] = 1
		} else {
			m["nonfinite_loss"] = 1
		}
	}
	t := metricsTable(L, m)
	if up.Where != nil {
		t.RawSetString("nonfinite", lua.LString(nonFiniteText(up.Where)))
	}
	L.Push(t)
	return 1
}

// policy:zero_grad() clears the gradient and what forward_backward accumulated into it.
func (e *Env) modelZeroGrad(L *lua.LState) int {
	p := checkModel(L, 1)
	if p.frozen {
		L.ArgError(1, "a reference is frozen: it has no gradient")
	}
	e.trainerOf(p).ZeroGrads()
	return 0
}

// model:score(batch [, {entropy=, micro_batch=}]) → logprobs [, entropies]: per completion,
// per token, under the model.
func modelScore(L *lua.LState) int {
	m := checkModel(L, 1)
	b := checkBatch(L, 2)
	o := struct {
		Entropy    bool `json:"entropy"`
		MicroBatch int  `json:"micro_batch"`
	}{}
	options(L, 3, "model:score", &o)
	if o.MicroBatch < 0 {
		L.ArgError(3, "micro_batch must be ≥ 0")
	}
	logp, ent, err := grpo.Score(L.Context(), m.m, b.b, o.MicroBatch, o.Entropy)
	if err != nil {
		L.RaiseError("model:score: %s", err.Error())
	}
	L.Push(nestedList(L, logp))
	if !o.Entropy {
		return 1
	}
	L.Push(nestedList(L, ent))
	return 2
}

func nestedList[T float32 | float64](L *lua.LState, v [][]T) *lua.LTable {
	t := L.CreateTable(len(v), 0)
	for _, row := range v {
		t.Append(list(L, row))
	}
	return t
}

func list[T float32 | float64](L *lua.LState, v []T) *lua.LTable {
	t := L.CreateTable(len(v), 0)
	for _, x := range v {
		t.Append(lua.LNumber(x))
	}
	return t
}

// batch:set_advantages(advantages): one number per completion, or one list per completion
// with a number per token.
func batchSetAdvantages(L *lua.LState) int {
	b := checkBatch(L, 1)
	t := L.CheckTable(2)
	n := len(b.b.Completions)
	if t.Len() != n {
		L.ArgError(2, fmt.Sprintf("%d advantages for %d completions", t.Len(), n))
	}
	if _, perToken := t.RawGetInt(1).(*lua.LTable); !perToken || n == 0 {
		b.b.Advantages, b.tokenAdv = numberList(L, t, "batch:set_advantages"), nil
		return 0
	}
	adv := make([][]float64, n)
	for i := range n {
		row, ok := t.RawGetInt(i + 1).(*lua.LTable)
		if !ok {
			L.ArgError(2, fmt.Sprintf("completion %d: %s, want a list of per-token advantages like the others", i+1, t.RawGetInt(i+1).Type()))
		}
		adv[i] = numberList(L, row, fmt.Sprintf("batch:set_advantages: completion %d", i+1))
		if want := len(b.b.Completions[i].Tokens); len(adv[i]) != want {
			L.ArgError(2, fmt.Sprintf("completion %d has %d tokens, %d advantages given", i+1, want, len(adv[i])))
		}
	}
	b.b.Advantages, b.tokenAdv = nil, adv
	return 0
}

// batch:advantages() → the advantages set on the batch (per completion or per token), or nil.
func batchAdvantages(L *lua.LState) int {
	b := checkBatch(L, 1)
	switch {
	case b.tokenAdv != nil:
		L.Push(nestedList(L, b.tokenAdv))
	case b.b.Advantages != nil:
		L.Push(list(L, b.b.Advantages))
	default:
		L.Push(lua.LNil)
	}
	return 1
}

// batch:logprobs() → the log-probabilities the sampler recorded, per completion and token
// (copies).
func batchLogprobs(L *lua.LState) int {
	b := checkBatch(L, 1)
	t := L.CreateTable(len(b.b.Completions), 0)
	for _, c := range b.b.Completions {
		t.Append(list(L, c.LogProbs))
	}
	L.Push(t)
	return 1
}

// batch:components() → the reward components set with the rewards, name → list, or nil.
func batchComponents(L *lua.LState) int {
	b := checkBatch(L, 1)
	if b.b.Components == nil {
		L.Push(lua.LNil)
		return 1
	}
	t := L.CreateTable(0, len(b.b.Components))
	for k, v := range b.b.Components {
		t.RawSetString(k, list(L, v))
	}
	L.Push(t)
	return 1
}

// rook.grpo.advantages(batch [, settings]) → advantages: rook.grpo.step's, from the rewards,
// set on the batch.
func (e *Env) luaGRPOAdvantages(L *lua.LState) int {
	b := checkBatch(L, 1)
	cfg := settingsArg[grpo.Config](L, 2, "grpo", "rook.grpo.advantages")
	adv, err := grpo.StepAdvantages(e.world(), b.b, cfg)
	if err != nil {
		L.RaiseError("rook.grpo.advantages: %s", err.Error())
	}
	b.tokenAdv = nil
	L.Push(list(L, adv))
	return 1
}

// model:diff(other [, {grads=}]) → max_abs_diff, max_abs: the largest difference between two
// models' weights (or gradients), and the largest magnitude of the first's.
func modelDiff(L *lua.LState) int {
	a, b := checkModel(L, 1), checkModel(L, 2)
	o := struct {
		Grads bool `json:"grads"`
	}{}
	options(L, 3, "model:diff", &o)
	if a.m.Config != b.m.Config {
		L.ArgError(2, "the models' architectures differ")
	}
	x, y := a.m.ParamsHost(), b.m.ParamsHost()
	if o.Grads {
		x, y = a.m.GradsHost(), b.m.GradsHost()
	}
	diff, scale := 0.0, 0.0
	for i := range x {
		diff = max(diff, math.Abs(float64(x[i])-float64(y[i])))
		scale = max(scale, math.Abs(float64(x[i])))
	}
	L.Push(lua.LNumber(diff))
	L.Push(lua.LNumber(scale))
	return 2
}

// LossFuncError is a Lua loss function that raised, or returned what the engine cannot apply:
// it names the function, and the completion and token where it can.
type LossFuncError struct {
	Func       string // "recipe.lua:12" or the function's name
	Completion int    // from 1; 0 when it concerns no one completion
	Token      int    // from 1; 0 when it concerns no one token
	Reason     string
}

func (e *LossFuncError) Error() string {
	where := ""
	switch {
	case e.Token > 0:
		where = fmt.Sprintf(" completion %d token %d:", e.Completion, e.Token)
	case e.Completion > 0:
		where = fmt.Sprintf(" completion %d:", e.Completion)
	}
	return fmt.Sprintf("loss function %s:%s %s", e.Func, where, e.Reason)
}

// functionName is where a Lua function is defined (file:line), for messages.
func functionName(L *lua.LState, f *lua.LFunction) string {
	if f.Proto == nil {
		return "(a Go function)"
	}
	return fmt.Sprintf("%s:%d", f.Proto.SourceName, f.Proto.LineDefined)
}

// seqData is one completion as a Lua loss reads it, in float64.
type seqData struct {
	completion, group            int // from 1
	logp, old, ref, entropy, adv []float64
	detached                     []float64 // logp again: held still by rook.gradcheck
	hasRef, hasEntropy           bool
	tokens                       int // here: a token-level loss may see part of a completion
	first, length                int // its tokens here are first+1 .. first+tokens of length
}

// table is the completion's table for the loss function.
func (s *seqData) table(L *lua.LState) *lua.LTable {
	t := L.CreateTable(0, 10)
	t.RawSetString("logp", list(L, s.logp))
	t.RawSetString("logp_detached", list(L, s.detached))
	t.RawSetString("old_logp", list(L, s.old))
	t.RawSetString("advantages", list(L, s.adv))
	mask := L.CreateTable(s.tokens, 0)
	for range s.tokens {
		mask.Append(lua.LNumber(1))
	}
	t.RawSetString("mask", mask)
	if s.hasRef {
		t.RawSetString("ref_logp", list(L, s.ref))
	}
	if s.hasEntropy {
		t.RawSetString("entropy", list(L, s.entropy))
	}
	t.RawSetString("completion", lua.LNumber(s.completion))
	t.RawSetString("group", lua.LNumber(s.group))
	t.RawSetString("n", lua.LNumber(max(s.length, s.tokens)))
	t.RawSetString("first", lua.LNumber(s.first+1))
	return t
}

func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// callLoss calls a Lua loss function on completions seqs with the minibatch's totals, and
// reads back its loss and ∂L/∂logp (and ∂L/∂H with entropy) per token.
func (e *Env) callLoss(L *lua.LState, fn *lua.LFunction, seqs []seqData, tot grpo.Totals, entropy bool) (loss float64, dlogp, dent [][]float64, err error) {
	name := functionName(L, fn)
	arg := L.CreateTable(len(seqs), 0)
	for i := range seqs {
		arg.Append(seqs[i].table(L))
	}
	info := L.CreateTable(0, 3)
	info.RawSetString("sequences", lua.LNumber(tot.Sequences))
	info.RawSetString("tokens", lua.LNumber(tot.Tokens))
	info.RawSetString("max_new_tokens", lua.LNumber(tot.MaxNewTokens))
	top := L.GetTop()
	var callErr error
	e.guard.inLua(func() {
		callErr = L.CallByParam(lua.P{Fn: fn, NRet: 3, Protect: true}, arg, info)
	})
	if callErr != nil {
		return 0, nil, nil, &LossFuncError{Func: name, Reason: fmt.Sprintf("raised an error on completions %d .. %d: %v",
			seqs[0].completion, seqs[len(seqs)-1].completion, callErr)}
	}
	rl, rd, re := L.Get(top+1), L.Get(top+2), L.Get(top+3)
	L.SetTop(top)
	n, ok := rl.(lua.LNumber)
	if !ok {
		return 0, nil, nil, &LossFuncError{Func: name, Reason: fmt.Sprintf("returned %s as the loss, want a number (then the gradient per token)", describe(rl))}
	}
	if dlogp, err = readGrads(name, rd, seqs, "dlogp", false); err != nil {
		return 0, nil, nil, err
	}
	if entropy {
		if dent, err = readGrads(name, re, seqs, "dent", true); err != nil {
			return 0, nil, nil, err
		}
	} else if re != lua.LNil {
		return 0, nil, nil, &LossFuncError{Func: name, Reason: "returned a third value (∂L/∂H) but the pass computes no entropy: give forward_backward { entropy = true }"}
	}
	return float64(n), dlogp, dent, nil
}

// readGrads reads a loss function's gradient: a list with one list per completion, one number
// per token. optional: nil stands for zeros.
func readGrads(name string, v lua.LValue, seqs []seqData, what string, optional bool) ([][]float64, error) {
	if v == lua.LNil && optional {
		return nil, nil
	}
	t, ok := v.(*lua.LTable)
	if !ok {
		return nil, &LossFuncError{Func: name, Reason: fmt.Sprintf("returned %s as %s, want a list with one list of numbers per completion", describe(v), what)}
	}
	if t.Len() != len(seqs) {
		return nil, &LossFuncError{Func: name, Reason: fmt.Sprintf("%s has %d lists for %d completions", what, t.Len(), len(seqs))}
	}
	out := make([][]float64, len(seqs))
	for i, s := range seqs {
		row, ok := t.RawGetInt(i + 1).(*lua.LTable)
		if !ok {
			return nil, &LossFuncError{Func: name, Completion: s.completion, Reason: fmt.Sprintf("%s is %s, want a list of %d numbers", what, describe(t.RawGetInt(i+1)), s.tokens)}
		}
		if row.Len() != s.tokens {
			return nil, &LossFuncError{Func: name, Completion: s.completion, Reason: fmt.Sprintf("%s has %d values, want %d (one per token)", what, row.Len(), s.tokens)}
		}
		out[i] = make([]float64, s.tokens)
		for j := range s.tokens {
			x, ok := row.RawGetInt(j + 1).(lua.LNumber)
			if !ok {
				return nil, &LossFuncError{Func: name, Completion: s.completion, Token: j + 1, Reason: fmt.Sprintf("%s is %s, want a number", what, describe(row.RawGetInt(j+1)))}
			}
			out[i][j] = float64(x)
		}
	}
	return out, nil
}

// luaLoss makes a Lua function the engine's loss of whole completions: called once per
// micro-batch, its per-token loop runs in Lua over plain arrays (copies: it cannot change the
// recorded log-probabilities or the reference's).
func (e *Env) luaLoss(L *lua.LState, fn *lua.LFunction) grpo.SequenceLoss {
	return func(seqs []grpo.Sequence, tot grpo.Totals) (float64, error) {
		data := make([]seqData, len(seqs))
		entropy := false
		for i, s := range seqs {
			logp := f64s(s.Logp)
			data[i] = seqData{completion: s.Completion + 1, group: s.Prompt + 1, logp: logp, detached: slices.Clone(logp),
				old: f64s(s.Old), adv: s.Adv, tokens: len(s.Logp), first: s.First, length: s.Len,
				hasRef: s.Ref != nil, hasEntropy: s.Entropy != nil}
			if s.Ref != nil {
				data[i].ref = f64s(s.Ref)
			}
			if s.Entropy != nil {
				data[i].entropy, entropy = f64s(s.Entropy), true
			}
		}
		loss, dlogp, dent, err := e.callLoss(L, fn, data, tot, entropy)
		if err != nil {
			return 0, err
		}
		for i, s := range seqs {
			for t, d := range dlogp[i] {
				s.DLogp[t] = float32(d)
			}
			if dent != nil {
				for t, d := range dent[i] {
					s.DEnt[t] = float32(d)
				}
			}
		}
		return loss, nil
	}
}
