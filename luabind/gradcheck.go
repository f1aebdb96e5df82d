package luabind

import (
	"fmt"
	"math"
	"math/rand/v2"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/grpo"
)

// gradcheckOptions are rook.gradcheck's options: the random completions it makes (or the
// recipe's own), the step of the differences, and the tolerance.
type gradcheckOptions struct {
	Completions  int         `json:"completions"`
	Tokens       int         `json:"tokens"`
	Group        int         `json:"group"`
	Seed         uint64      `json:"seed"`
	Ref          bool        `json:"ref"`
	Entropy      bool        `json:"entropy"`
	Spread       float64     `json:"spread"`
	H            float64     `json:"h"`
	Tolerance    float64     `json:"tolerance"`
	MaxNewTokens int         `json:"max_new_tokens"`
	Sequences    *lua.LTable `json:"sequences"`
}

// rook.gradcheck(loss [, opts]) → ok, report: the gradient a Lua loss returns against central
// differences of the loss it returns, token by token.
func (e *Env) luaGradcheck(L *lua.LState) int {
	fn := L.CheckFunction(1)
	o := gradcheckOptions{Completions: 4, Tokens: 6, Group: 2, Seed: 1, Ref: true, Spread: 0.3, H: 1e-6, Tolerance: 1e-6}
	options(L, 2, "rook.gradcheck", &o)
	switch {
	case o.Completions < 1 || o.Tokens < 1 || o.Group < 1:
		L.ArgError(2, "completions, tokens and group must be ≥ 1")
	case !(o.H > 0) || !(o.Tolerance > 0):
		L.ArgError(2, "h and tolerance must be > 0")
	}
	var seqs []seqData
	if o.Sequences != nil {
		seqs = userSequences(L, o.Sequences, o.Entropy)
	} else {
		seqs = randomSequences(o)
	}
	tot := grpo.Totals{Sequences: len(seqs), MaxNewTokens: o.MaxNewTokens}
	for _, s := range seqs {
		tot.Tokens += s.tokens
		tot.MaxNewTokens = max(tot.MaxNewTokens, s.tokens)
	}
	raise := func(err error) { L.RaiseError("rook.gradcheck: %s", err.Error()) }
	_, dlogp, dent, err := e.callLoss(L, fn, seqs, tot, o.Entropy)
	if err != nil {
		raise(err)
	}
	lossAt := func() float64 {
		loss, _, _, err := e.callLoss(L, fn, seqs, tot, o.Entropy)
		if err != nil {
			raise(err)
		}
		return loss
	}
	var worst struct {
		abs, rel, grad, fd float64
		completion, token  int
		what               string
	}
	ok, checked := true, 0
	compare := func(i, t int, what string, x []float64, g float64) {
		v := x[t]
		x[t] = v + o.H
		up := lossAt()
		x[t] = v - o.H
		down := lossAt()
		x[t] = v
		fd := (up - down) / (2 * o.H)
		abs := math.Abs(g - fd)
		rel := abs / max(math.Abs(fd), math.Abs(g), 1e-300)
		checked++
		if !(abs <= o.Tolerance*max(1, math.Abs(fd))) {
			ok = false
		}
		if abs > worst.abs || math.IsNaN(abs) {
			worst.abs, worst.rel, worst.grad, worst.fd = abs, rel, g, fd
			worst.completion, worst.token, worst.what = seqs[i].completion, t+1, what
		}
	}
	for i := range seqs {
		for t := range seqs[i].tokens {
			compare(i, t, "dlogp", seqs[i].logp, dlogp[i][t])
			if o.Entropy {
				g := 0.0
				if dent != nil {
					g = dent[i][t]
				}
				compare(i, t, "dent", seqs[i].entropy, g)
			}
		}
	}
	report := map[string]any{"ok": ok, "checked": checked, "max_abs_err": worst.abs, "max_rel_err": worst.rel}
	if worst.completion > 0 {
		report["worst"] = map[string]any{"completion": worst.completion, "token": worst.token, "what": worst.what,
			"gradient": worst.grad, "finite_difference": worst.fd}
		report["text"] = fmt.Sprintf("%s at completion %d token %d: returned %.9g, finite differences %.9g (|Δ| %.3g, tolerance %.3g·max(1, |fd|))",
			worst.what, worst.completion, worst.token, worst.grad, worst.fd, worst.abs, o.Tolerance)
	}
	L.Push(lua.LBool(ok))
	L.Push(fromGo(L, report))
	return 2
}

// randomSequences are completions whose ratios to the sampler spread around 1 (some beyond
// any clip), with advantages of both signs per group.
func randomSequences(o gradcheckOptions) []seqData {
	r := rand.New(rand.NewPCG(o.Seed, 55))
	seqs := make([]seqData, o.Completions)
	for i := range seqs {
		n := 1 + r.IntN(o.Tokens)
		s := seqData{completion: i + 1, group: i/o.Group + 1, tokens: n, hasRef: o.Ref, hasEntropy: o.Entropy}
		a := r.NormFloat64()
		for range n {
			x := -0.05 - 4*r.Float64()
			s.logp = append(s.logp, x)
			s.old = append(s.old, x+o.Spread*r.NormFloat64())
			s.ref = append(s.ref, x+o.Spread*r.NormFloat64())
			s.entropy = append(s.entropy, 0.5+2.5*r.Float64())
			s.adv = append(s.adv, a)
		}
		s.detached = append([]float64(nil), s.logp...)
		seqs[i] = s
	}
	return seqs
}

// userSequences reads completions a recipe gives, as the loss function receives them.
func userSequences(L *lua.LState, t *lua.LTable, entropy bool) []seqData {
	if t.Len() == 0 {
		L.ArgError(2, "sequences: an empty list")
	}
	seqs := make([]seqData, t.Len())
	for i := range seqs {
		st, ok := t.RawGetInt(i + 1).(*lua.LTable)
		if !ok {
			L.ArgError(2, fmt.Sprintf("sequences[%d] is %s, want a table like the loss receives", i+1, describe(t.RawGetInt(i+1))))
		}
		field := func(name string, need bool) []float64 {
			v, ok := st.RawGetString(name).(*lua.LTable)
			if !ok {
				if need {
					L.ArgError(2, fmt.Sprintf("sequences[%d].%s is missing", i+1, name))
				}
				return nil
			}
			return numberList(L, v, fmt.Sprintf("rook.gradcheck: sequences[%d].%s", i+1, name))
		}
		s := seqData{completion: i + 1, group: i + 1, logp: field("logp", true), old: field("old_logp", true),
			adv: field("advantages", true), ref: field("ref_logp", false), entropy: field("entropy", entropy)}
		s.tokens, s.hasRef, s.hasEntropy = len(s.logp), s.ref != nil, s.entropy != nil
		for name, v := range map[string][]float64{"old_logp": s.old, "advantages": s.adv, "ref_logp": s.ref, "entropy": s.entropy} {
			if v != nil && len(v) != s.tokens {
				L.ArgError(2, fmt.Sprintf("sequences[%d].%s has %d values for %d tokens", i+1, name, len(v), s.tokens))
			}
		}
		if g, ok := st.RawGetString("group").(lua.LNumber); ok {
			s.group = int(g)
		}
		s.detached = append([]float64(nil), s.logp...)
		seqs[i] = s
	}
	return seqs
}
