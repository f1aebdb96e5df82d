package luabind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/rookscript/rookscript/engine/backend"
	"github.com/rookscript/rookscript/engine/device"
	"github.com/rookscript/rookscript/engine/dist"
	"github.com/rookscript/rookscript/engine/tokenizer"
)

// Options configure an Env.
type Options struct {
	// Args are the command line's key=value config overrides, applied by rook.config.
	Args []string
	// Recipe is the path of the recipe being run ("" in the REPL): modules are looked up in
	// the scripts/ directory beside it, and a TOML file beside it (same name, .toml) supplies
	// config values.
	Recipe string
	Stdout io.Writer // prints and logs; os.Stdout if nil
	Quiet  bool      // rook.log and progress lines are suppressed
	// Modules are extra Lua modules by name (source text), found by require before any file.
	Modules map[string]string
	// Trust runs the recipe with the user's rights: processes, native code, any file. By
	// default a recipe runs confined (sandbox.go); --trust and the REPL set this.
	Trust bool
	// LuaTimeLimit is how long a confined recipe may run Lua without calling into the engine
	// (DefaultLuaTimeLimit if 0; none if negative). LuaMemory bounds its Lua heap in bytes (a
	// gigabyte or less by default, defaultLuaMemory; none if negative). A trusted recipe has
	// neither: its memory is bounded by the process's (limits.go).
	LuaTimeLimit time.Duration
	LuaMemory    int64
	// Stderr takes warnings shown before a recipe starts (a module shadowed); os.Stderr if nil.
	Stderr io.Writer
	// World is the run's world of ranks when mpirun or srun started it (world.go); nil: one
	// rank. A rank other than 0 prints nothing and writes no run directory.
	World dist.Comm
}

// Env is one Lua state with module rook loaded and the Go resources its scripts create.
type Env struct {
	L    *lua.LState
	opts Options
	out  io.Writer
	args []override

	mu       sync.Mutex
	backends map[string]backend.Backend
	closers  []io.Closer
	config   map[string]any // the resolved rook.config, for run directories
	progress *progress      // the current run's progress line, which logs and prints keep intact

	access  *access     // what a confined recipe may touch; nil when trusted
	resume  *resumeInfo // set by rook.config when the command line resumes a run
	pending []*model    // models whose "model:" line waits for the resume (rook.load)
	runs    []*run      // every run this environment opened, in order
	intr    *interrupts // shared with the environments rook.exec starts
	guard   *guard      // the recipe's time and memory (limits.go)
	// promptWarned: a prompt that ends inside a token was reported (checkPrompts).
	promptWarned bool
	frozen       map[*lua.LTable]*lua.LTable // tables → their read-only views (freeze.go)
	moduleEnv    *lua.LTable                 // the embedded modules' globals, for a confined recipe
}

// UsageError is an error in how rookscript was invoked (exit code 2), not in the recipe.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// New creates an environment. Malformed overrides, and a path named for writing that a
// confined recipe may not write (sandbox.go), are a UsageError.
func New(opts Options) (*Env, error) { return newEnv(opts, nil) }

// newEnv is New; a confined environment that rook.exec starts inherits its caller's access,
// since its arguments come from a recipe, not from the command line.
func newEnv(opts Options, inherit *access) (*Env, error) {
	args, err := parseOverrides(opts.Args)
	if err != nil {
		return nil, UsageError{err}
	}
	if opts.World != nil && opts.World.Rank() != 0 {
		opts.Quiet = true // rank 0 speaks for the run
	}
	e := &Env{opts: opts, out: opts.Stdout, args: args, backends: map[string]backend.Backend{},
		intr: &interrupts{}}
	if e.out == nil {
		e.out = os.Stdout
	}
	e.guard = newGuard(opts)
	e.L = lua.NewState(lua.Options{IncludeGoStackTrace: false})
	e.L.SetContext(context.Background())
	e.L.PreloadModule("rook", e.loader)
	for name, src := range opts.Modules {
		e.L.PreloadModule(name, func(L *lua.LState) int {
			fn, err := L.Load(strings.NewReader(src), name+".lua")
			if err != nil {
				L.RaiseError("%s", err.Error())
			}
			L.Push(fn)
			L.Call(0, 1)
			return 1
		})
	}
	e.installSearchers()
	e.L.SetGlobal("print", e.L.NewFunction(e.print))
	e.L.GetGlobal("os").(*lua.LTable).RawSetString("exit", e.L.NewFunction(e.osExit))
	if !opts.Trust {
		if e.access = inherit; inherit == nil {
			if e.access, err = newAccess(opts.Recipe, args); err != nil {
				e.L.Close()
				return nil, UsageError{err}
			}
		}
		e.confine()
	}
	return e, nil
}

// Close releases engines, files and the Lua state.
func (e *Env) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i].Close()
	}
	e.closers = nil
	e.L.Close()
}

func (e *Env) addCloser(c io.Closer) {
	e.mu.Lock()
	e.closers = append(e.closers, c)
	e.mu.Unlock()
}

// backend returns the shared backend for a device name.
func (e *Env) backend(name string, threads int) (backend.Backend, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := strings.ToLower(name)
	if key == "" {
		key = "cpu"
	}
	if b, ok := e.backends[key]; ok {
		return b, nil
	}
	// In a data-parallel run each rank on a machine takes its own GPU: the one of its local rank.
	// Every rank runs the recipe, so every rank opens the device here at the same point, and
	// the GPUs join the world's ranks (NCCL) to sum gradients on the devices.
	b, err := device.Open(key, device.Options{Threads: threads, Ordinal: dist.LocalRank(), World: e.world()})
	if err != nil {
		return nil, err
	}
	e.backends[key] = b
	return b, nil
}

var tok = sync.OnceValues(tokenizer.GPT2)

// RunFile runs a recipe with ctx as the context of every long call, and reports how it
// ended: nil, a *RecipeError (a Lua error, with its traceback), an *InterruptedError (Interrupt
// was called, or ctx cancelled after it), a *StoppedError (a run's recovery policy stopped
// it), or an error saying that a run's last checkpoint save failed even though the recipe
// went on.
func (e *Env) RunFile(ctx context.Context, path string) error {
	src, err := os.ReadFile(path)
	if err != nil {
		return UsageError{fmt.Errorf("cannot read recipe: %w", err)}
	}
	return e.outcome(e.run(ctx, string(src), path))
}

// DoString runs a chunk of Lua source named name.
func (e *Env) DoString(ctx context.Context, src, name string) error { return e.run(ctx, src, name) }

// RecipeError is a failure inside Lua code, with the Lua traceback. Config marks an error in
// the recipe's configuration (a rook.config_error): it names its key, and needs no traceback.
type RecipeError struct {
	Message   string
	Traceback string
	Config    bool
	Err       error // the Go error raised, when one was (a *ConfigError for Config)
}

func (e *RecipeError) Unwrap() error { return e.Err }

func (e *RecipeError) Error() string {
	if e.Traceback == "" {
		return e.Message
	}
	return e.Message + "\n" + e.Traceback
}

func (e *Env) run(ctx context.Context, src, name string) error {
	fn, err := e.L.Load(strings.NewReader(src), name)
	if err != nil {
		return &RecipeError{Message: syntaxMessage(src, name, err)}
	}
	e.L.Push(fn)
	return e.call(ctx, 0, 0)
}

// call calls the function on the stack with ctx as the context of every long call, under the
// watchdog of the recipe's limits (limits.go). It turns Lua errors into *RecipeError (message
// with the recipe's file:line, and the Lua traceback), a limit passed into *LimitError, an
// os.exit into *ExitError and a cancelled ctx into ctx.Err().
func (e *Env) call(ctx context.Context, nargs, nret int) error {
	wctx, stop := e.watch(ctx)
	e.L.SetContext(wctx)
	defer func() {
		stop()
		e.L.SetContext(context.Background())
	}()
	err := e.L.PCall(nargs, nret, nil)
	if err == nil {
		return nil
	}
	var apiErr *lua.ApiError
	msg := err.Error()
	if errors.As(err, &apiErr) {
		msg = apiErr.Object.String()
	}
	if wctx.Err() != nil {
		if lerr := limitError(wctx, msg); lerr != nil {
			return lerr
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return context.Canceled // an interrupt the recipe could not honour in pure Lua
	}
	if errors.As(err, &apiErr) {
		if ud, ok := apiErr.Object.(*lua.LUserData); ok {
			if err, ok := ud.Value.(error); ok {
				msg = err.Error()
				if _, isConfig := err.(*ConfigError); isConfig {
					return &RecipeError{Message: msg, Config: true, Err: err} // it names its key: no traceback
				}
			}
		}
		// assert(rook.load(path)) turns an expected failure (nil, err) into an error: its
		// message says what and where, and the traceback would only show assert.
		if strings.HasPrefix(strings.TrimPrefix(apiErr.StackTrace, "stack traceback:\n\t"), "[G]: in function 'assert'") {
			return &RecipeError{Message: msg}
		}
		return &RecipeError{Message: msg, Traceback: apiErr.StackTrace}
	}
	return err
}

// print writes its arguments like Lua's print, to the environment's output.
func (e *Env) print(L *lua.LState) int {
	n := L.GetTop()
	parts := make([]string, n)
	for i := 1; i <= n; i++ {
		parts[i-1] = L.ToStringMeta(L.Get(i)).String()
	}
	e.say(strings.Join(parts, "\t"))
	return 0
}

// say prints a line without breaking a progress line being drawn; on rank 0 only, in a
// data-parallel run (every rank runs the same recipe).
func (e *Env) say(line string) {
	if !e.main() {
		return
	}
	if e.progress != nil && e.progress.tty && e.progress.drawn {
		e.progress.note(line)
		return
	}
	fmt.Fprintln(e.out, line)
}
