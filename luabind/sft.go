package luabind

import (
	"fmt"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/sft"
)

// docsArg reads SFT documents: strings (every token is learned) or tables {prompt=, target=}
// whose prompt and target are tokenized separately, exactly as a rollout sees them (the BPE
// of a whole row can merge across the boundary, and a model trained on that would expect a
// token its prompts never end with); with completionOnly only the target's tokens are
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
			pt := tk.Encode(string(p))
			d := sft.Doc{Tokens: append(pt, tk.EncodeDoc(string(g))...)}
			if completionOnly {
				d.ScoreFrom = max(0, len(pt)-1)
			}
			docs = append(docs, d)
		default:
			L.ArgError(n, fmt.Sprintf("document %d is a %s", i, v.Type()))
		}
	}
	return docs
}

// rook.sft.step(model, opt, docs [, {lr=, max_grad_norm=1, micro_tokens=,
// loss_on="completion"|"all"}]) → metrics {loss, tokens, grad_norm, lr, finite, ...}: one
// optimizer step on mean cross-entropy.
func luaSFTStep(L *lua.LState) int {
	m := checkModel(L, 1)
	a := checkAdam(L, 2)
	if a.model != m {
		L.ArgError(2, "this optimizer belongs to another model")
	}
	o := optsArg(L, 4, "rook.sft.step")
	cfg := sft.Config{LR: o.num("lr", a.o.Config.LR), MaxGradNorm: o.num("max_grad_norm", 1), MicroTokens: o.int("micro_tokens", 0)}
	docs := docsArg(L, 3, lossOn(L, o))
	o.done()
	res, err := sft.Step(L.Context(), m.m, a.o, docs, cfg)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	L.Push(metricsTable(L, map[string]float64(res)))
	return 1
}

// rook.sft.loss(model, docs [, {micro_tokens=, loss_on=}]) → mean cross-entropy (no update).
func luaSFTLoss(L *lua.LState) int {
	m := checkModel(L, 1)
	o := optsArg(L, 3, "rook.sft.loss")
	micro := o.int("micro_tokens", 0)
	docs := docsArg(L, 2, lossOn(L, o))
	o.done()
	loss, err := sft.Loss(L.Context(), m.m, docs, micro)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	L.Push(lua.LNumber(loss))
	return 1
}

func lossOn(L *lua.LState, o *opts) bool {
	switch v := o.str("loss_on", "completion"); v {
	case "completion":
		return true
	case "all":
		return false
	default:
		L.RaiseError("%s: loss_on %q is not completion or all", o.what, v)
		return false
	}
}
