package luabind

import (
	"fmt"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/sft"
)

// docsArg reads SFT documents: strings (every token is learned) or tables {prompt=, target=}
// (only the target's tokens are learned; prompt and target are tokenized separately, as a
// rollout sees them). Every document ends with <|endoftext|>.
func docsArg(L *lua.LState, n int) []sft.Doc {
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
			docs = append(docs, sft.Doc{Tokens: append(pt, tk.EncodeDoc(string(g))...), ScoreFrom: max(0, len(pt)-1)})
		default:
			L.ArgError(n, fmt.Sprintf("document %d is a %s", i, v.Type()))
		}
	}
	return docs
}

// rook.sft.step(model, opt, docs [, {lr=, max_grad_norm=1, micro_tokens=}]) → metrics
// {loss, tokens, grad_norm, lr, finite, ...}: one optimizer step on mean cross-entropy.
func luaSFTStep(L *lua.LState) int {
	m := checkModel(L, 1)
	a := checkAdam(L, 2)
	if a.model != m {
		L.ArgError(2, "this optimizer belongs to another model")
	}
	docs := docsArg(L, 3)
	o := optsArg(L, 4, "rook.sft.step")
	cfg := sft.Config{LR: o.num("lr", a.o.Config.LR), MaxGradNorm: o.num("max_grad_norm", 1), MicroTokens: o.int("micro_tokens", 0)}
	o.done()
	res, err := sft.Step(L.Context(), m.m, a.o, docs, cfg)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	L.Push(metricsTable(L, map[string]float64(res)))
	return 1
}

// rook.sft.loss(model, docs [, {micro_tokens=}]) → mean cross-entropy (no update).
func luaSFTLoss(L *lua.LState) int {
	m := checkModel(L, 1)
	docs := docsArg(L, 2)
	o := optsArg(L, 3, "rook.sft.loss")
	micro := o.int("micro_tokens", 0)
	o.done()
	loss, err := sft.Loss(L.Context(), m.m, docs, micro)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	L.Push(lua.LNumber(loss))
	return 1
}
