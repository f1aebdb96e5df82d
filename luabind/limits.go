package luabind

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/internal/procmem"
)

// A confined recipe's Lua is bounded in time and memory, as Redis bounds a script
// (lua-time-limit) and Roblox a script's run without a yield: time counts while the recipe
// runs Lua without calling into the engine, memory is the Go heap the engine's buffers do
// not account for. A watchdog goroutine samples both while a chunk runs and, past a limit,
// cancels the Lua state's context: the VM checks it before every instruction, so the recipe
// stops at the line it was on, and a pcall cannot swallow it (the next instruction after the
// pcall stops again). A trusted recipe has no time limit, and its memory limit is a quarter
// of what the process may hold (a doubling string overshoots a limit up to four times), so
// that it ends with this error instead of the runtime's fatal one or the kernel's OOM killer.

// DefaultLuaTimeLimit is how long a confined recipe may run Lua between calls into the
// engine (--lua-time-limit).
const DefaultLuaTimeLimit = time.Minute

// maxDefaultLuaMemory caps the default Lua memory of a confined recipe (--lua-memory).
const maxDefaultLuaMemory = 1 << 30

// interruptGrace is how long an interrupted recipe may stay in pure Lua before it is stopped:
// a step boundary, where the run saves, needs an engine call to reach.
const interruptGrace = 2 * time.Second

// watchEvery is the watchdog's period: a string that doubles each instruction takes tens of
// milliseconds per doubling once it is large enough to matter.
const watchEvery = 5 * time.Millisecond

// engineWatchEvery is the watchdog's period while the recipe is inside an engine call.
const engineWatchEvery = 50 * time.Millisecond

// LimitError ends a recipe that ran pure Lua for longer than its time limit, or whose Lua
// memory passed its limit. Where is the recipe's file:line it was stopped at.
type LimitError struct {
	Memory bool          // the memory limit; else the time limit
	Time   time.Duration // the time limit
	Bytes  int64         // the memory limit
	Where  string
}

func (e *LimitError) Error() string {
	where := ""
	if e.Where != "" {
		where = e.Where + ": "
	}
	if e.Memory {
		return fmt.Sprintf("%sthe recipe's Lua memory passed %s (--lua-memory raises the limit)", where, humanize.IBytes(uint64(e.Bytes)))
	}
	return fmt.Sprintf("%sthe recipe ran Lua for %s without calling into the engine (--lua-time-limit raises the limit; 0 lifts it)", where, e.Time)
}

// ExitError is how a recipe ends that called os.exit: the environment closes as after any
// other ending (a run's lock is released, its last checkpoint stays the one to resume), then
// the process exits with Code.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("the recipe called os.exit(%d)", e.Code) }

// guard tracks where a recipe's time goes: in Lua, or in calls into the engine.
type guard struct {
	depth   atomic.Int32 // engine calls in progress (a Lua callback inside one sets it to 0)
	since   atomic.Int64 // when the current stretch of pure Lua began, in Unix nanoseconds
	time    time.Duration
	memory  int64 // bytes of Lua heap; 0: none
	trusted bool
	base    int64 // the heap that is not the recipe's when it starts (the tokenizer, the runtime)
	based   bool
	stop    context.CancelCauseFunc // ends the chunk running now (watch)
}

func newGuard(opts Options) *guard {
	g := &guard{time: opts.LuaTimeLimit, memory: opts.LuaMemory, trusted: opts.Trust}
	switch {
	case g.time == 0:
		g.time = DefaultLuaTimeLimit
	case g.time < 0:
		g.time = 0
	}
	switch {
	case g.memory == 0:
		g.memory = defaultLuaMemory()
	case g.memory < 0:
		g.memory = 0
	}
	if g.trusted {
		g.time, g.memory = 0, processMemory()/4
	}
	g.since.Store(time.Now().UnixNano())
	return g
}

// processMemory is the heap the process may hold before the system refuses it: its RAM or
// cgroup limit, or, lower, a third of its address-space limit (the Go runtime reserves
// address space well beyond its heap); 0 where neither can be read.
func processMemory() int64 {
	limit, err := procmem.Available()
	if err != nil {
		limit = 0
	}
	if as, ok := procmem.AddressLimit(); ok && (limit == 0 || as/3 < limit) {
		limit = as / 3
	}
	return limit * 9 / 10
}

// defaultLuaMemory is a confined recipe's Lua memory by default: a gigabyte, or an eighth of
// what the process may hold where that is less (a doubling string needs three times its size
// at once).
func defaultLuaMemory() int64 {
	if p := processMemory(); p > 0 && p/8 < maxDefaultLuaMemory {
		return p / 8
	}
	return maxDefaultLuaMemory
}

func (g *guard) enter() { g.depth.Add(1) }

func (g *guard) leave() {
	if g.depth.Add(-1) == 0 {
		g.since.Store(time.Now().UnixNano())
	}
}

// inLua runs f, a call from the engine back into the recipe's Lua (a reward function, a
// config rule): its time is the recipe's again.
func (g *guard) inLua(f func()) {
	d := g.depth.Swap(0)
	g.since.Store(time.Now().UnixNano())
	defer func() {
		g.depth.Store(d)
	}()
	f()
}

// wrap makes a Go function of module rook an engine call.
func (g *guard) wrap(f lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		g.enter()
		defer g.leave()
		return f(L)
	}
}

// lightCalls are the functions of module rook that do no engine work: a loop of them is a
// loop of Lua.
var lightCalls = map[string]bool{"clock": true, "log": true, "exists": true, "cache_dir": true}

// guardModule makes every Go function in t (and the tables under it) an engine call, but
// lightCalls at its top.
func (g *guard) guardModule(t *lua.LTable, top bool, seen map[*lua.LTable]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	var keys []lua.LValue
	t.ForEach(func(k, _ lua.LValue) { keys = append(keys, k) })
	for _, k := range keys {
		switch v := t.RawGet(k).(type) {
		case *lua.LFunction:
			if v.IsG && !(top && lightCalls[k.String()]) {
				v.GFunction = g.wrap(v.GFunction)
			}
		case *lua.LTable:
			g.guardModule(v, false, seen)
		}
	}
}

// heapBytes is the bytes of heap objects now, freed ones not yet swept included, and those
// the last garbage collection found live.
func heapBytes() (now, live int64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	for i, v := range []*int64{&now, &live} {
		if s[i].Value.Kind() == metrics.KindUint64 {
			*v = int64(s[i].Value.Uint64())
		}
	}
	return now, live
}

// luaBytes is the heap the recipe holds (all of it for a trusted one) less the engine's
// buffers and the base: now, and as the last collection found it.
func (g *guard) luaBytes() (now, live int64) {
	now, live = heapBytes()
	other := backend.HostLive() + g.base
	return now - other, live - other
}

// overMemory reports whether the recipe's heap passed its limit: as the last collection found
// it, since the heap now also holds garbage (an engine call's temporaries, the recipe's short
// strings); or now, by far more than garbage can account for. Collections come with the
// heap's growth, so a heap that keeps growing is found within one of them; forcing one to
// confirm would take longer than a string that doubles needs to exhaust the machine.
// Garbage as large as the limit is rare: the engine's large buffers are counted apart.
func (g *guard) overMemory() bool {
	if g.memory <= 0 {
		return false
	}
	now, live := g.luaBytes()
	return live >= g.memory || now >= 2*g.memory
}

// checkAlloc ends the recipe with the memory limit's error before a library call allocates
// n bytes at once (string.rep, string.gsub): one such call can ask for more than the machine
// has, and the watchdog only sees what has been allocated.
func (g *guard) checkAlloc(L *lua.LState, n float64) {
	if _, live := g.luaBytes(); g.memory > 0 && n > float64(g.memory-max(live, 0)) {
		g.end(L, &LimitError{Memory: true, Bytes: g.memory, Where: where(L)})
	}
}

// end stops the running chunk with err, which a pcall in the recipe cannot keep from ending
// it: the context is cancelled before the error is raised.
func (g *guard) end(L *lua.LState, err error) {
	if g.stop != nil {
		g.stop(err)
	}
	L.RaiseError("%s", err.Error())
}

// where is the recipe's file:line that called the current Go function.
func where(L *lua.LState) string {
	for level := 1; ; level++ {
		dbg, ok := L.GetStack(level)
		if !ok {
			return ""
		}
		if _, err := L.GetInfo("Sl", dbg, lua.LNil); err == nil && dbg.CurrentLine > 0 {
			return fmt.Sprintf("%s:%d", dbg.Source, dbg.CurrentLine)
		}
	}
}

// watch runs the watchdog over ctx until the returned stop is called; a limit passed (or an
// interrupt that the recipe cannot honour in pure Lua) cancels the returned context with
// its cause.
func (e *Env) watch(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	g := e.guard
	prev := g.stop
	g.stop = cancel
	if !g.based {
		runtime.GC()
		_, live := heapBytes()
		g.base, g.based = live-backend.HostLive(), true
	}
	g.since.Store(time.Now().UnixNano())
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(watchEvery)
		defer t.Stop()
		var interrupted time.Time
		every := watchEvery
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				// The engine's time and memory are the engine's: while it works, wake seldom,
				// so as not to take a core from its threads.
				next := watchEvery
				if g.depth.Load() > 0 {
					next = engineWatchEvery
				}
				if next != every {
					every = next
					t.Reset(every)
				}
				if g.depth.Load() > 0 {
					continue
				}
				lua := now.Sub(time.Unix(0, g.since.Load()))
				switch {
				case g.time > 0 && lua > g.time:
					cancel(&LimitError{Time: g.time})
					return
				case g.overMemory():
					cancel(&LimitError{Memory: true, Bytes: g.memory})
					return
				}
				if e.intr.signal() != nil {
					if interrupted.IsZero() {
						interrupted = now
					}
					if now.Sub(interrupted) > interruptGrace && lua > interruptGrace {
						cancel(context.Canceled) // as a second signal would
						return
					}
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel(nil); g.stop = prev }
}

// limitError is the LimitError or ExitError that ended a chunk, with the position the VM
// stopped at taken from msg ("file:line: context canceled"); nil if ctx ended otherwise.
func limitError(ctx context.Context, msg string) error {
	cause := context.Cause(ctx)
	var le *LimitError
	if errors.As(cause, &le) {
		out := *le
		if out.Where == "" {
			if i := strings.Index(msg, ": "+context.Canceled.Error()); i > 0 {
				out.Where = msg[:i]
			}
		}
		return &out
	}
	var ee *ExitError
	if errors.As(cause, &ee) {
		return ee
	}
	return nil
}
