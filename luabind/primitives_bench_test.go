package luabind

import (
	"cmp"
	"context"
	"os"
	"testing"
)

// BenchmarkLuaLoss: one GRPO update on one batch four ways — rook.grpo.step, the primitives
// with the built-in loss, the primitives with the GRPO loss written in Lua on whole completions
// (one forward, the Lua loop, then the backward of its row gradients, which computes the
// LM head's logits again), and the same loss token-level (called per LM-head chunk inside the
// fused pass) — on ROOKSCRIPT_BENCH_MODEL (default random:small), 8 prompts × 8 completions of
// up to 48 tokens.
//
//	go test ./luabind -run '^$' -bench LuaLoss -benchtime 5x
func BenchmarkLuaLoss(b *testing.B) {
	env, err := New(Options{Quiet: true, Trust: true})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	setup := `
		rook, losses = require("rook"), require("losses")
		policy = rook.load("` + cmp.Or(os.Getenv("ROOKSCRIPT_BENCH_MODEL"), "random:small") + `")
		opt = rook.adamw(policy, { lr = 1e-5 })
		local prompts = {}
		for i = 1, 8 do prompts[i] = "P: " .. string.rep("x", i) end
		batch = policy:rollout(prompts, { group = 8, max_new_tokens = 48, seed = 1 })
		local r = {}
		for i = 1, #batch do r[i] = (i * 7 % 5) / 4 end
		batch:set_rewards(r)
		s = rook.grpo.defaults()
		lua_grpo = losses.grpo(s)`
	if err := env.DoString(context.Background(), setup, "bench.lua"); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, chunk string }{
		{"step", `rook.grpo.step(policy, nil, opt, batch, s)`},
		{"builtin_loss", `rook.grpo.advantages(batch, s); policy:forward_backward(batch, "grpo", s); opt:step(s)`},
		{"lua_loss", `rook.grpo.advantages(batch, s); policy:forward_backward(batch, lua_grpo, s); opt:step(s)`},
		{"lua_loss_token_level", `rook.grpo.advantages(batch, s); policy:forward_backward(batch, lua_grpo, s, { token_level = true }); opt:step(s)`},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				if err := env.DoString(context.Background(), c.chunk, "bench.lua"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
