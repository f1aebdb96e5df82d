package luabind

import (
	"fmt"
	"math"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/engine/rollout"
)

const batchType = "rook.batch"

// batch is a rollout: its prompts' items, the completions with the settings they were drawn
// with, and (once scored) rewards. items[i] is the item of b.Prompts[i], the prompt of group i:
// everything a scorer reads of the prompt, wherever the batch is scored.
type batch struct {
	b     *rollout.Batch
	items []item
	// tokenAdv are advantages the recipe set per token (batch:set_advantages); per completion
	// they are b.Advantages.
	tokenAdv [][]float64
	ref      *refScores // the reference's log-probabilities, once a pass asked for them
}

func (b *batch) String() string {
	return fmt.Sprintf("rook.batch(%d prompts × %d completions%s)", len(b.items), b.b.Group, map[bool]string{true: ", scored", false: ""}[b.b.Rewards != nil])
}

func checkBatch(L *lua.LState, n int) *batch { return check[*batch](L, n, batchType) }

var batchMethods = map[string]lua.LGFunction{
	"logprob_gap":    batchLogprobGap,
	"completion":     batchCompletion,
	"texts":          batchTexts,
	"prompts":        batchPrompts,
	"items":          batchItems,
	"set_rewards":    batchSetRewards,
	"set_advantages": batchSetAdvantages,
	"advantages":     batchAdvantages,
	"logprobs":       batchLogprobs,
	"components":     batchComponents,
	"rewards":        batchRewards,
	"stats":          batchStats,
}

// Fields: batch.group, batch.size (completions), batch.scored, and how it was sampled:
// batch.temperature, batch.top_k, batch.top_p, batch.greedy, batch.max_new_tokens,
// batch.seed, batch.stop, batch.stop_rule; batch[i] is completion i.
func batchIndex(L *lua.LState) int {
	b := checkBatch(L, 1)
	if i, ok := L.Get(2).(lua.LNumber); ok {
		L.Push(completionTable(L, b, int(i)))
		return 1
	}
	switch L.CheckString(2) {
	case "group":
		L.Push(lua.LNumber(b.b.Group))
	case "size":
		L.Push(lua.LNumber(len(b.b.Completions)))
	case "scored":
		L.Push(lua.LBool(b.b.Rewards != nil))
	case "temperature":
		L.Push(lua.LNumber(b.b.Temperature))
	case "top_k":
		L.Push(lua.LNumber(b.b.Shaping.TopK))
	case "top_p":
		L.Push(lua.LNumber(b.b.Shaping.TopP))
	case "greedy":
		L.Push(lua.LBool(b.b.Shaping.Greedy))
	case "max_new_tokens":
		L.Push(lua.LNumber(b.b.MaxNewTokens))
	case "seed":
		L.Push(lua.LNumber(b.b.Seed))
	case "stop":
		L.Push(fromGo(L, b.b.Stop))
	case "stop_rule":
		L.Push(lua.LString(b.b.StopRule))
	default:
		L.Push(lua.LNil)
	}
	return 1
}

// completionTable describes completion i (1-based): prompt, text, tokens, truncated, stop (the
// stop string or rule that finished it, if one did), group, reward (when scored).
func completionTable(L *lua.LState, b *batch, i int) lua.LValue {
	if i < 1 || i > len(b.b.Completions) {
		return lua.LNil
	}
	c := b.b.Completions[i-1]
	t := L.CreateTable(0, 7)
	t.RawSetString("prompt", lua.LString(b.items[c.Prompt].prompt))
	t.RawSetString("text", lua.LString(c.Text))
	t.RawSetString("tokens", lua.LNumber(len(c.Tokens)))
	t.RawSetString("truncated", lua.LBool(c.Truncated))
	if c.Stop != "" {
		t.RawSetString("stop", lua.LString(c.Stop))
	}
	t.RawSetString("group", lua.LNumber(c.Prompt+1))
	if b.b.Rewards != nil {
		t.RawSetString("reward", lua.LNumber(b.b.Rewards[i-1]))
	}
	return t
}

func batchCompletion(L *lua.LState) int {
	L.Push(completionTable(L, checkBatch(L, 1), L.CheckInt(2)))
	return 1
}

func batchTexts(L *lua.LState) int {
	b := checkBatch(L, 1)
	t := L.CreateTable(len(b.b.Completions), 0)
	for _, c := range b.b.Completions {
		t.Append(lua.LString(c.Text))
	}
	L.Push(t)
	return 1
}

// batch:prompts() → the prompt of every completion, aligned with batch:texts().
func batchPrompts(L *lua.LState) int {
	b := checkBatch(L, 1)
	t := L.CreateTable(len(b.b.Completions), 0)
	for _, c := range b.b.Completions {
		t.Append(lua.LString(b.items[c.Prompt].prompt))
	}
	L.Push(t)
	return 1
}

// batch:items() → the item of every prompt, one per group in order (a completion's group
// indexes it), as item tables: a string prompt's has only prompt=; one from positions:next has
// its fields, the game it is judged with among them.
func batchItems(L *lua.LState) int {
	b := checkBatch(L, 1)
	t := L.CreateTable(len(b.items), 0)
	for _, it := range b.items {
		t.Append(it.table(L))
	}
	L.Push(t)
	return 1
}

// batch:set_rewards(rewards [, components]) sets one reward per completion, and optionally
// named components (tables of the same length) that the step reports as rewards/<name>/mean.
func batchSetRewards(L *lua.LState) int {
	b := checkBatch(L, 1)
	r := numberList(L, L.CheckTable(2), "batch:set_rewards")
	if len(r) != len(b.b.Completions) {
		L.ArgError(2, fmt.Sprintf("%d rewards for %d completions", len(r), len(b.b.Completions)))
	}
	var comps map[string][]float64
	if ct := L.OptTable(3, nil); ct != nil {
		comps = map[string][]float64{}
		ct.ForEach(func(k, v lua.LValue) {
			t, ok := v.(*lua.LTable)
			if !ok {
				L.ArgError(3, fmt.Sprintf("component %s is not a list", k))
			}
			vals := numberList(L, t, "batch:set_rewards component "+k.String())
			if len(vals) != len(r) {
				L.ArgError(3, fmt.Sprintf("component %s has %d values for %d completions", k, len(vals), len(r)))
			}
			comps[k.String()] = vals
		})
	}
	b.b.Rewards, b.b.Components = r, comps
	return 0
}

func batchRewards(L *lua.LState) int {
	b := checkBatch(L, 1)
	if b.b.Rewards == nil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(fromGo(L, b.b.Rewards))
	return 1
}

// batch:stats() → rollout cost and shape: seconds, new_tokens, tokens_per_sec, mean_length,
// truncated (fraction), and reward mean/std/min/max once scored.
func batchStats(L *lua.LState) int {
	b := checkBatch(L, 1)
	s := b.b.Stats
	st := map[string]any{"seconds": s.Seconds, "new_tokens": s.NewTokens, "tokens_per_sec": s.TokensPerSecond(),
		"decode_steps": s.DecodeSteps, "prefill_tokens": s.PrefillTokens}
	trunc, length := 0, 0
	for _, c := range b.b.Completions {
		length += len(c.Tokens)
		if c.Truncated {
			trunc++
		}
	}
	if n := len(b.b.Completions); n > 0 {
		st["mean_length"], st["truncated"] = float64(length)/float64(n), float64(trunc)/float64(n)
	}
	if r := b.b.Rewards; len(r) > 0 {
		lo, hi, sum := math.Inf(1), math.Inf(-1), 0.0
		for _, v := range r {
			lo, hi, sum = min(lo, v), max(hi, v), sum+v
		}
		mean := sum / float64(len(r))
		sq := 0.0
		for _, v := range r {
			sq += (v - mean) * (v - mean)
		}
		st["reward_mean"], st["reward_min"], st["reward_max"] = mean, lo, hi
		st["reward_std"] = math.Sqrt(sq / float64(len(r)))
	}
	L.Push(fromGo(L, st))
	return 1
}

// rook.reward.fn(batch, f) scores each completion with a Lua function
// f(prompt, text, completion) → number and sets the batch's rewards. Returns the rewards.
func (e *Env) luaRewardFn(L *lua.LState) int {
	b := checkBatch(L, 1)
	f := L.CheckFunction(2)
	r := make([]float64, len(b.b.Completions))
	for i, c := range b.b.Completions {
		e.guard.inLua(func() {
			if err := L.CallByParam(lua.P{Fn: f, NRet: 1, Protect: false},
				lua.LString(b.items[c.Prompt].prompt), lua.LString(c.Text), completionTable(L, b, i+1)); err != nil {
				L.RaiseError("%s", err.Error())
			}
		})
		ret := L.Get(-1)
		L.Pop(1)
		v, ok := ret.(lua.LNumber)
		if !ok {
			L.RaiseError("rook.reward.fn: the reward function returned %s for completion %d, want a number", ret.Type(), i+1)
		}
		r[i] = float64(v)
	}
	b.b.Rewards, b.b.Components = r, nil
	L.Push(fromGo(L, r))
	return 1
}

// batch:logprob_gap(model [, {alone=4}]) → the largest |Δ| between the log-probabilities the
// sampler recorded and the model's training forward for the same tokens, over the whole batch
// packed together, and over the first `alone` completions each forwarded alone
// (DESIGN §6.2: both must be below 1e-4). Returns packed, alone.
func batchLogprobGap(L *lua.LState) int {
	b := checkBatch(L, 1)
	m := checkModel(L, 2)
	o := struct {
		Alone int `json:"alone"`
	}{Alone: 4}
	options(L, 3, "batch:logprob_gap", &o)
	alone := o.Alone
	gap := func(idx []int) float64 {
		var gb gpt2.Batch
		var want []float32
		for _, i := range idx {
			c := b.b.Completions[i]
			p := b.b.Prompts[c.Prompt]
			gb.Add(append(append([]int32{}, p...), c.Tokens...), len(p)-1)
			want = append(want, c.LogProbs...)
		}
		var out gpt2.Output
		if err := m.m.Forward(&gb, b.b.Temperature, false, &out); err != nil {
			L.RaiseError("%s", err.Error())
		}
		worst := 0.0
		for i := range want {
			worst = max(worst, math.Abs(float64(out.LogP[i]-want[i])))
		}
		return worst
	}
	all := make([]int, len(b.b.Completions))
	for i := range all {
		all[i] = i
	}
	packed, single := 0.0, 0.0
	if len(all) > 0 {
		packed = gap(all)
	}
	for i := 0; i < min(alone, len(all)); i++ {
		single = max(single, gap([]int{i}))
	}
	L.Push(lua.LNumber(packed))
	L.Push(lua.LNumber(single))
	return 2
}
