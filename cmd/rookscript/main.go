// Command rookscript trains chess language models with GRPO; recipes written in Lua drive
// the training loop. See README.md.
//
//	rookscript FILE.lua [key=value ...]   run a recipe with config overrides
//	rookscript                            interactive REPL
//	rookscript version                    print the version
//
// Exit codes: 0 success, 1 recipe error (message and Lua traceback on stderr), 2 usage.
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

	"github.com/rookscript/rookscript/luabind"
	"github.com/rookscript/rookscript/repl"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

const usage = `rookscript — GRPO training of chess language models, driven by Lua recipes

Usage:
  rookscript [--quiet] FILE.lua [key=value ...]   run a recipe; key=value overrides its config
  rookscript                                      interactive REPL
  rookscript plot RUN_DIR... [-o OUT.png]         PNG of runs' metrics over steps, overlaid
  rookscript version                              print the version
  rookscript --help                               this help

Config: a recipe declares its keys with rook.config{...}; values come from those defaults,
then FILE.toml beside the recipe (or config=PATH), then key=value arguments. Unknown keys and
values of the wrong type are errors. resume=RUN_DIR continues a run from its last checkpoint.

Exit codes: 0 ok, 1 recipe error, 2 usage error.
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	quiet := false
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
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
	env, err := luabind.New(luabind.Options{Args: args[1:], Recipe: recipe, Stdout: stdout, Quiet: quiet})
	if err != nil {
		fmt.Fprintf(stderr, "rookscript: %v\n", err)
		return 2
	}
	defer env.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return exitCode(env.RunFile(ctx, recipe), stderr)
}

func exitCode(err error, stderr io.Writer) int {
	var usageErr luabind.UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usageErr):
		fmt.Fprintf(stderr, "rookscript: %v\n", err)
		return 2
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "rookscript: interrupted")
		return 1
	}
	fmt.Fprintf(stderr, "rookscript: %v\n", err)
	return 1
}

func runREPL(stdout, stderr io.Writer, quiet bool) int {
	env, err := luabind.New(luabind.Options{Stdout: stdout, Quiet: quiet})
	if err != nil {
		fmt.Fprintf(stderr, "rookscript: %v\n", err)
		return 2
	}
	defer env.Close()
	if err := repl.Run(repl.Config{Env: env, HistoryFile: repl.DefaultHistoryFile(), Out: stdout}); err != nil {
		fmt.Fprintf(stderr, "rookscript: %v\n", err)
		return 1
	}
	return 0
}
