package luabind

import (
	"errors"
	"fmt"

	"github.com/dustin/go-humanize"
	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/sft"
)

// docsArg reads SFT documents: strings (every token is learned) or tables {prompt=, target=}
// tokenized as their joined text and split where the prompt ends, as RookWorld-LM read its
// training text; a prompt that ends inside a token of that text (a trailing pad space, which
// BPE joins to the next word) is refused naming the item and its token-consistent form, since
// no rollout of it meets that split. With completionOnly only the target's tokens are
// learned. Every document ends with <|endoftext|>.
func docsArg(L *lua.LState, n int, completionOnly bool) []sft.Doc {
	t := L.CheckTable(n)
	tk := tokenizerOrRaise(L)
	docs := make([]sft.Doc, 0, t.Len())
	for i := 1; i <= t.Len(); i++ {
		switch v := t.RawGetInt(i).(type) {
		case lua.LString:
			docs = append(docs, sft.Doc{Tokens: tk.EncodeDoc(string(v))})
		case *lua.LTable:
			p, ok1 := v.RawGetString("prompt").(lua.LString)
			g, ok2 := v.RawGetString("target").(lua.LString)
			if !ok1 || !ok2 {
				L.ArgError(n, fmt.Sprintf("document %d: want a string or a table with string fields prompt and target", i))
			}
			// Tokenized as one text and split where the prompt ends, as a model trained on
			// whole documents reads it (engine/sft Docs).
			d, err := sft.Docs(tk, []sft.Item{{Prompt: string(p), Target: string(g)}}, completionOnly)
			var be *sft.BoundaryError
			if errors.As(err, &be) {
				be.Item = i
				L.ArgError(n, be.Error())
			}
			docs = append(docs, d...)
		default:
			L.ArgError(n, fmt.Sprintf("document %d is a %s", i, v.Type()))
		}
	}
	return docs
}

// sftLossOptions are rook.sft.loss's settings; rook.sft.step adds the update's.
type sftLossOptions struct {
	MicroTokens int    `json:"micro_tokens"` // tokens per forward/backward (memory only); 0: the whole batch
	LossOn      string `json:"loss_on"`      // "completion": the targets' tokens; "all": the prompts' too
}

// sftOptions are rook.sft.step's settings.
type sftOptions struct {
	MaxGradNorm float64 `json:"max_grad_norm"` // global gradient-norm clip; 0 disables it
	sftLossOptions
}

// completionOnly reports whether only the targets' tokens are learned.
func (o sftLossOptions) completionOnly() (bool, error) {
	switch o.LossOn {
	case "completion":
		return true, nil
	case "all":
		return false, nil
	}
	return false, fmt.Errorf("loss_on %q is not completion or all", o.LossOn)
}

// rook.sft.step(model, opt, docs [, settings]) → metrics {loss, tokens, grad_norm, lr,
// finite, ...}: one optimizer step on mean cross-entropy, at the optimizer's scheduled
// learning rate. settings: sftOptions's {max_grad_norm=1, micro_tokens=0,
// loss_on="completion"|"all"}, a table or an sft section.
func luaSFTStep(L *lua.LState) int {
	m := checkModel(L, 1)
	a := checkAdam(L, 2)
	if a.model != m {
		L.ArgError(2, "this optimizer belongs to another model")
	}
	o := settingsArg[sftOptions](L, 4, "sft", "rook.sft.step")
	completionOnly, _ := o.completionOnly()
	docs := docsArg(L, 3, completionOnly)
	res, err := sft.Step(L.Context(), m.m, a.o, docs, sft.Config{LR: a.o.LR(), MaxGradNorm: o.MaxGradNorm, MicroTokens: o.MicroTokens})
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	L.Push(metricsTable(L, map[string]float64(res)))
	return 1
}

// rook.sft.plan(model, {batch=, seq_len=, budget=}) → the micro-batch plan of SFT on model
// within a memory budget (rook.memory.budget's spec): batch documents a step of up to seq_len
// tokens (the model's context by default, and at most). Returns {micro_batch=, seq_len=,
// bytes=, budget=, parts={...}, text=}: micro_tokens is micro_batch × seq_len.
func luaSFTPlan(L *lua.LState) int {
	m := checkModel(L, 1)
	o := struct {
		Budget lua.LValue `json:"budget"`
		Batch  int        `json:"batch"`
		SeqLen int        `json:"seq_len"`
	}{SeqLen: m.m.Config.MaxSeqLen}
	options(L, 2, "rook.sft.plan", &o)
	budget, err := budgetBytes(o.Budget)
	if err == nil && (o.Batch < 1 || o.SeqLen < 1) {
		err = fmt.Errorf("batch and seq_len must be ≥ 1, got %d and %d", o.Batch, o.SeqLen)
	}
	if err != nil {
		L.RaiseError("rook.sft.plan: %s", err.Error())
	}
	p := sft.Plan{Model: m.m.Config, Budget: budget, Batch: o.Batch, SeqLen: min(o.SeqLen, m.m.Config.MaxSeqLen)}
	docs, f, fits := p.MicroBatch()
	if !fits {
		raiseConfigf(L, "rook.sft.plan: SFT needs %s with one document per micro-batch, over its %s budget (%s): lower batch (%d) or seq_len (%d), or raise the budget (mem_budget)",
			humanize.Bytes(uint64(f.Total())), humanize.Bytes(uint64(budget)), f, p.Batch, p.SeqLen)
	}
	return pushPlan(L, docs, p.Batch, p.SeqLen, f, budget)
}

// rook.sft.loss(model, docs [, {micro_tokens=0, loss_on="completion"|"all"}]) → mean
// cross-entropy (no update).
func luaSFTLoss(L *lua.LState) int {
	m := checkModel(L, 1)
	o := sftLossOptions{LossOn: "completion"}
	options(L, 3, "rook.sft.loss", &o)
	completionOnly, err := o.completionOnly()
	if err != nil {
		L.RaiseError("rook.sft.loss: %s", err.Error())
	}
	loss, err := sft.Loss(L.Context(), m.m, docsArg(L, 2, completionOnly), o.MicroTokens)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	L.Push(lua.LNumber(loss))
	return 1
}
