// Command rookscript trains chess language models with GRPO; recipes written in Lua drive
// the training loop. See README.md.
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

const usage = `rookscript — GRPO training of chess language models, driven by Lua recipes

Usage:
  rookscript FILE.lua [key=value ...]   run a recipe with config overrides
  rookscript                            interactive REPL
  rookscript version                    print the version
  rookscript --help                     this help

Status: this build has the numeric core only (GPT-2 engine, tokenizer); the Lua recipe
runner and the REPL are not built yet, so only 'version' and '--help' work.
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "rookscript", version)
		return 0
	case "--help", "-h", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "rookscript: cannot run %q: the recipe runner is not built yet (see --help)\n", args[0])
	return 2
}
