// Command rookscript trains chess language models with GRPO; recipes written in Lua drive
// the training loop. See README.md.
//
//	rookscript FILE.lua [key=value ...]   run a recipe with config overrides
//	rookscript                            interactive REPL
//	rookscript plot RUN_DIR...            PNG of runs' metrics over steps (plot.go)
//	rookscript samples RUN_DIR            the completions a run logged (samples.go)
//	rookscript version                    print the version
//
// A recipe runs confined (no processes, no native code, writes only in its run directory,
// bounded Lua time and memory; docs/SECURITY.md) unless --trust is given; the REPL runs trusted.
//
// Exit codes: 0 success; 1 recipe error (message and Lua traceback on stderr), a failed
// checkpoint save included; 2 usage or config error (a bad flag or key=value, a config value
// the recipe or an engine call refuses, a plan over the memory budget); 3 a run's recovery
// policy stopped it (report.txt); 4 the recipe passed its Lua time or memory limit; 130 / 143
// interrupted by SIGINT / SIGTERM (the first signal lets the current step finish and saves a
// checkpoint, then prints the command that resumes; a second one, or the recipe staying in
// pure Lua, aborts at once). A recipe that calls os.exit(n) ends with n, its run closed as
// after any other ending.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rookscript/rookscript/engine/dist"
	"github.com/rookscript/rookscript/luabind"
	"github.com/rookscript/rookscript/repl"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

const usage = `rookscript — GRPO training of chess language models, driven by Lua recipes

Usage:
  rookscript [--quiet] [--trust] [--lua-time-limit=D] [--lua-memory=SIZE] FILE.lua [key=value ...]
                                                  run a recipe; key=value overrides its config
  rookscript                                      interactive REPL
  rookscript plot RUN_DIR... [-o OUT.png] [-f]    PNG of runs' metrics over steps, overlaid
  rookscript samples RUN_DIR [--step N | --last K]
                                                  print the completions a run logged
  rookscript version                              print the version
  rookscript --help                               this help

Config: a recipe declares its keys with rook.config{...}; values come from those defaults,
then FILE.toml beside the recipe (or config=PATH), then key=value arguments. Unknown keys and
values of the wrong type are errors. resume=RUN_DIR continues a run from its last checkpoint,
with the config it recorded (overrides are applied, logged and recorded).

Trust: a recipe runs confined: it cannot start processes or load native code; it reads its
own folder, the cache and the paths named on the command line (data=, model=, config=, …),
and writes only in its run directory (run_dir=, resume=, base_dir=) and the paths named for
writing (out=, cache_file=); never a .lua file. Its Lua may run 1m without calling into the
engine (--lua-time-limit, 0 for none) and hold 1GiB (--lua-memory, less where the process
may use less). --trust runs it with your rights: for a recipe you wrote or checked. The REPL
is trusted. docs/SECURITY.md says what each allows.

Signals: Ctrl-C (or SIGTERM) finishes the current step, saves a checkpoint and prints the
command that resumes; a second Ctrl-C aborts at once.

Exit codes: 0 ok, 1 recipe error (a failed checkpoint save included), 2 usage or config
error (a bad flag, key or value; a plan over the memory budget), 3 stopped by the run's
recovery policy, 4 past the recipe's Lua time or memory limit, 130 / 143 interrupted by
SIGINT / SIGTERM; os.exit(n) in a recipe: n.
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	quiet, trust := false, false
	var limits luaLimits
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		if ok, err := limits.parse(args[0]); ok {
			if err != nil {
				fmt.Fprintf(stderr, "rookscript: %v\n\n%s", err, usage)
				return 2
			}
			args = args[1:]
			continue
		}
		switch args[0] {
		case "--help", "-h", "-help":
			fmt.Fprint(stdout, usage)
			return 0
		case "--version":
			fmt.Fprintln(stdout, "rookscript", version)
			return 0
		case "--quiet", "-q":
			quiet = true
			args = args[1:]
		case "--trust":
			trust = true
			args = args[1:]
		default:
			fmt.Fprintf(stderr, "rookscript: unknown flag %s\n\n%s", args[0], usage)
			return 2
		}
	}
	if len(args) == 0 {
		return runREPL(stdout, stderr, quiet)
	}
	switch args[0] {
	case "plot":
		return runPlot(args[1:], stdout, stderr)
	case "samples":
		return runSamples(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "rookscript", version)
		return 0
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	recipe := args[0]
	if !strings.HasSuffix(recipe, ".lua") {
		fmt.Fprintf(stderr, "rookscript: %q is not a recipe (want FILE.lua)\n\n%s", recipe, usage)
		return 2
	}
	// Started by mpirun or srun, this process is one rank of a data-parallel run (dist).
	world, err := dist.Open()
	if err != nil {
		fmt.Fprintf(stderr, "rookscript: %v\n", err)
		return 1
	}
	if world.Size() > 1 {
		stderr = rankWriter{stderr, world.Rank()}
	}
	code := runRank(recipe, args[1:], world, stdout, stderr, quiet, trust, limits)
	if code != 0 && world.Size() > 1 {
		// The other ranks may be waiting for this one in a collective: end them all.
		world.Abort(code)
	}
	if err := world.Close(); err != nil && code == 0 {
		fmt.Fprintf(stderr, "rookscript: %v\n", err)
		return 1
	}
	return code
}

func runRank(recipe string, args []string, world dist.Comm, stdout, stderr io.Writer, quiet, trust bool, limits luaLimits) int {
	env, err := luabind.New(luabind.Options{Args: args, Recipe: recipe, Stdout: stdout, Stderr: stderr, Quiet: quiet,
		Trust: trust, World: world, LuaTimeLimit: limits.time, LuaMemory: limits.memory})
	if err != nil {
		fmt.Fprintf(stderr, "rookscript: %v\n", err)
		return 2
	}
	defer env.Close()
	if world.Rank() == 0 {
		for _, w := range env.ShadowWarnings() {
			fmt.Fprintln(stderr, w)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopSignals := handleSignals(env, cancel, stderr)
	defer stopSignals()
	return exitCode(env.RunFile(ctx, recipe), stderr)
}

// rankWriter starts each write with the rank it comes from: in a data-parallel run every
// rank reports its own errors on the one terminal.
type rankWriter struct {
	w    io.Writer
	rank int
}

func (r rankWriter) Write(p []byte) (int, error) {
	if _, err := fmt.Fprintf(r.w, "[rank %d] %s", r.rank, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// handleSignals turns the first SIGINT or SIGTERM into a graceful interrupt (the open run
// saves at the end of the current step) and the second, or a first one with no run to save,
// into cancelling ctx, which aborts the running call at once.
func handleSignals(env *luabind.Env, cancel context.CancelFunc, stderr io.Writer) (stop func()) {
	sigs := make(chan os.Signal, 2)
	done := make(chan struct{})
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		first := true
		for {
			select {
			case <-done:
				return
			case sig := <-sigs:
				if first {
					first = false
					if env.Interrupt(sig) {
						fmt.Fprintf(stderr, "\nrookscript: %s: finishing the current step, then saving a checkpoint (send it again to abort at once)\n", signalName(sig))
						continue
					}
				}
				fmt.Fprintf(stderr, "\nrookscript: %s: aborting\n", signalName(sig))
				cancel()
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

func signalName(sig os.Signal) string {
	if sig == syscall.SIGTERM {
		return "SIGTERM"
	}
	return "SIGINT"
}

func exitCode(err error, stderr io.Writer) int {
	var usageErr luabind.UsageError
	var interrupted *luabind.InterruptedError
	var stopped *luabind.StoppedError
	var recipeErr *luabind.RecipeError
	var limitErr *luabind.LimitError
	var exitErr *luabind.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exitErr):
		return exitErr.Code
	case errors.As(err, &limitErr):
		fmt.Fprintf(stderr, "rookscript: %v\n", err)
		return 4
	case errors.As(err, &usageErr), errors.As(err, &recipeErr) && recipeErr.Config:
		fmt.Fprintf(stderr, "rookscript: %v\n", err)
		return 2
	case errors.As(err, &interrupted):
		fmt.Fprintf(stderr, "rookscript: %v\n", err)
		if interrupted.Checkpoint != "" && interrupted.Recipe != "" {
			fmt.Fprintf(stderr, "resume with: %s\n", shellJoin(os.Args[0], interrupted.Recipe, "resume="+interrupted.Dir))
		}
		return interrupted.ExitCode()
	case errors.As(err, &stopped):
		fmt.Fprintf(stderr, "rookscript: %v\n", err)
		return 3
	}
	fmt.Fprintf(stderr, "rookscript: %v\n", err)
	return 1
}

// shellJoin writes a command line a POSIX shell reads back as these words.
func shellJoin(words ...string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w != "" && strings.IndexFunc(w, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) < 0 {
			out[i] = w
			continue
		}
		out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

func runREPL(stdout, stderr io.Writer, quiet bool) int {
	env, err := luabind.New(luabind.Options{Stdout: stdout, Quiet: quiet, Trust: true}) // the user is typing
	if err != nil {
		fmt.Fprintf(stderr, "rookscript: %v\n", err)
		return 2
	}
	defer env.Close()
	env.InstallHelp() // help(x): x's entry of docs/lua-api.md
	if err := repl.Run(repl.Config{Env: env, HistoryFile: repl.DefaultHistoryFile(), Out: stdout}); err != nil {
		fmt.Fprintf(stderr, "rookscript: %v\n", err)
		return 1
	}
	return 0
}
