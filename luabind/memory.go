package luabind

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/gpt2"
	"github.com/rookscript/rookscript/internal/procmem"
)

// DefaultBudgetFraction is the share of the machine's RAM a recipe's memory budget defaults to.
const DefaultBudgetFraction = 0.5

// memoryModule builds rook.memory: the machine's RAM, memory budgets and the process's peak
// resident memory. Micro-batch plans are the training loops' own (rook.grpo.plan,
// rook.sft.plan).
func memoryModule(L *lua.LState) *lua.LTable {
	return L.SetFuncs(L.NewTable(), map[string]lua.LGFunction{
		"ram":    luaMemRAM,
		"budget": luaMemBudget,
		"peak":   luaMemPeak,
		"limit":  luaMemLimit,
	})
}

// rook.memory.limit(spec) → bytes, set: the Go runtime's soft memory limit becomes spec (a
// budget spec), so that the garbage collector runs sooner and returns freed memory to the
// system as the heap nears it. Without it the heap may grow to twice what is live and freed
// buffers stay resident: a recipe whose phases (evaluation, training, saving) each allocate
// their own peaks at the sum, not at the largest. A soft limit, never an allocation failure.
// GOMEMLIMIT in the environment wins: the limit is left alone and set is false. Returns the
// limit in effect.
func luaMemLimit(L *lua.LState) int {
	if os.Getenv("GOMEMLIMIT") != "" {
		L.Push(lua.LNumber(debug.SetMemoryLimit(-1)))
		L.Push(lua.LFalse)
		return 2
	}
	b, err := budgetBytes(L.Get(1))
	if err != nil {
		L.ArgError(1, err.Error())
	}
	debug.SetMemoryLimit(b)
	L.Push(lua.LNumber(b))
	L.Push(lua.LTrue)
	return 2
}

// rook.memory.ram() → the RAM this process may use in bytes: the machine's (MemTotal), or its
// cgroup's limit where lower (procmem.Available); nil, err where neither can be read.
func luaMemRAM(L *lua.LState) int {
	b, err := procmem.Available()
	if err != nil {
		return pushErr(L, err)
	}
	L.Push(lua.LNumber(b))
	return 1
}

// rook.memory.budget(spec) → bytes. spec: "" or nil for the default share of the machine's
// RAM, a fraction in (0, 1] ("0.25" or 0.25) of it, or a size ("8GB", "512 MiB", a number of
// bytes).
func luaMemBudget(L *lua.LState) int {
	b, err := budgetBytes(L.Get(1))
	if err != nil {
		L.ArgError(1, err.Error())
	}
	L.Push(lua.LNumber(b))
	return 1
}

func budgetBytes(v lua.LValue) (int64, error) {
	var spec string
	switch x := v.(type) {
	case nil, *lua.LNilType:
	case lua.LNumber:
		spec = strconv.FormatFloat(float64(x), 'f', -1, 64) // not 'g': 8.3e+07 is no size
	case lua.LString:
		spec = strings.TrimSpace(string(x))
	default:
		return 0, fmt.Errorf("memory budget: want a size or a fraction of RAM, got %s", v.Type())
	}
	fraction := DefaultBudgetFraction
	if spec != "" {
		f, err := strconv.ParseFloat(spec, 64)
		switch {
		case err == nil && f > 0 && f <= 1:
			fraction = f
		case err == nil && f > 1:
			return int64(f), nil
		case err == nil:
			return 0, fmt.Errorf("memory budget %q: a fraction must be in (0, 1]", spec)
		default:
			b, err := humanize.ParseBytes(spec)
			if err != nil || b == 0 {
				return 0, fmt.Errorf("memory budget %q: want a size such as 8GB or a fraction of RAM such as 0.25", spec)
			}
			return int64(b), nil
		}
	}
	ram, err := procmem.Available()
	if err != nil {
		return 0, fmt.Errorf("memory budget: %w (give a size instead)", err)
	}
	return int64(fraction * float64(ram)), nil
}

// pushPlan returns a micro-batch plan to Lua: {micro_batch=, seq_len=, bytes=, budget=,
// parts={...}, text=}, of micro-batches of seqs of a step's sequences.
func pushPlan(L *lua.LState, seqs, sequences, seqLen int, f gpt2.Footprint, budget int64) int {
	text := fmt.Sprintf("micro-batches of %d of %d sequences (≤ %d tokens each): %s planned of a %s budget (%s)",
		seqs, sequences, seqLen, humanize.Bytes(uint64(f.Total())), humanize.Bytes(uint64(budget)), f)
	parts := map[string]any{"weights": f.Weights, "grads": f.Grads, "moments": f.Moments, "activations": f.Activations,
		"backward": f.Backward, "head": f.Head, "kv_cache": f.KVCache, "sampling": f.Sampling, "data": f.Data}
	L.Push(fromGo(L, map[string]any{"micro_batch": seqs, "seq_len": seqLen, "bytes": f.Total(), "budget": budget,
		"parts": parts, "text": text}))
	return 1
}

// rook.memory.peak() → the process's peak resident memory in bytes (VmHWM), or nil, err.
func luaMemPeak(L *lua.LState) int {
	b, err := procmem.Peak()
	if err != nil {
		return pushErr(L, err)
	}
	L.Push(lua.LNumber(b))
	return 1
}
