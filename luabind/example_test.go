package luabind_test

import (
	"context"
	"fmt"

	"github.com/rookscript/rookscript/luabind"
)

func run(args []string, src string) {
	env, err := luabind.New(luabind.Options{Args: args, Quiet: true})
	if err != nil {
		fmt.Println("usage error:", err)
		return
	}
	defer env.Close()
	if err := env.DoString(context.Background(), src, "example.lua"); err != nil {
		fmt.Println(err.(*luabind.RecipeError).Message)
	}
}

// A recipe declares its config keys with defaults; the command line overrides them by name,
// parsed as the default's type (tables in TOML syntax).
func Example_config() {
	run([]string{"lr=3e-5", "betas=[0.9, 0.99]", "adam.eps=1e-6"}, `
		local rook = require("rook")
		local cfg = rook.config{ lr = 1e-5, betas = { 0.9, 0.95 }, steps = 200, adam = { eps = 1e-8 } }
		print(cfg.lr, cfg.betas[2], cfg.steps, cfg.adam.eps)
	`)
	// Output: 3e-05	0.99	200	1e-06
}

// A misspelt key is an error naming it, with the closest known key.
func Example_configUnknownKey() {
	run([]string{"betta=0.1"}, `
		local rook = require("rook")
		rook.config{ steps = 200, grpo = { beta = 0.005 } }
	`)
	// Output: example.lua:3: command line: unknown key "betta" (did you mean "beta"?)
}

// A section holds one engine call's settings: those the recipe gives, and every other one at
// the call's default. The command line reaches a setting by its name (beta) or with its section
// (grpo.epsilon); the call takes the section as it is.
func Example_configSections() {
	run([]string{"beta=0.01", "grpo.epsilon=0.1"}, `
		local rook = require("rook")
		local cfg = rook.config{ steps = 200, grpo = { beta = 0.005 } }
		print(cfg.grpo.beta, cfg.grpo.epsilon, cfg.grpo.loss_type, rook.grpo.defaults(cfg.grpo).beta)
	`)
	// Output: 0.01	0.1	grpo	0.01
}

// A section is a plain table; the call that reads it checks it as the config did.
func Example_configSetter() {
	run(nil, `
		local rook = require("rook")
		local cfg = rook.config{ grpo = { beta = 0.05 } }
		cfg.grpo.beta = 0.02
		print(rook.grpo.defaults(cfg.grpo).beta)
		cfg.grpo.beta = -1
		rook.grpo.defaults(cfg.grpo)
	`)
	// Output:
	// 0.02
	// example.lua:7: rook.grpo.defaults: grpo: beta must be a finite number ≥ 0, got -1
}

// A recipe declares what its own values must be; a value that breaks its rule stops the
// recipe at rook.config, before anything else runs, naming the key (and no traceback).
func Example_configRules() {
	run([]string{"group=1"}, `
		local rook = require("rook")
		local cfg = rook.config({ prompts = 8, group = 8, env_fraction = 0.5 },
		                        { prompts = "integer >= 1", group = "integer >= 2", env_fraction = "[0, 1]" })
		print("not reached")
	`)
	// Output: example.lua:3: group must be an integer ≥ 2, got 1
}

// Values must have their default's type.
func Example_configWrongType() {
	run([]string{"steps=many"}, `require("rook").config{ steps = 200 }`)
	// Output: example.lua:1: command line: steps: want a number, got "many"
}

// Expected failures return nil, err; misuse raises an error at the caller's line.
func Example_errors() {
	run([]string{"model=checkpoints/missing"}, `
		local rook = require("rook")
		local cfg = rook.config{ model = "default" }
		local m, err = rook.load(cfg.model)
		print(m, err)
		rook.adamw("not a model")
	`)
	// Output:
	// nil	model not found: checkpoints/missing
	// example.lua:6: bad argument #1 to adamw (rook.model expected, got string)
}

// A recipe runs confined: it reads and writes only where the run needs to, and the paths the
// command line names (model= above); anything else is refused, saying how to allow it.
func Example_confinement() {
	run(nil, `
		local rook = require("rook")
		print(pcall(rook.load, "/etc/models/gpt2"))
		print(pcall(os.execute, "rm -rf /"))
	`)
	// Output:
	// false	example.lua:3: a confined recipe cannot read /etc/models/gpt2 (it may read the recipe's folder, the cache, its run directory and the paths named on the command line, never a dot-file): name it on the command line (out=PATH, data=PATH, …), or run with --trust to lift the confinement for a recipe you wrote or checked
	// false	example.lua:4: os.execute is not available to a confined recipe (it starts processes); run with --trust to lift the confinement for a recipe you wrote or checked
}

// The GPT-2 tokenizer: RookWorld strings are plain GPT-2 BPE; <|endoftext|> is rook.eot.
func Example_tokenizer() {
	run(nil, `
		local rook = require("rook")
		local ids = rook.encode("M: e2e4 d2d4")
		print(#ids, rook.decode(ids), rook.eot)
	`)
	// Output: 10	M: e2e4 d2d4	50256
}
