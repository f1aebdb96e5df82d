package luabind_test

// The step as primitives: advantages set on the batch, a pass with a loss written in Lua, the
// optimizer step. The loss returns its value and ∂loss/∂logp per token; rook.gradcheck checks
// that gradient against finite differences of the value.
func Example_forwardBackward() {
	run(nil, `
		local rook, adv = require("rook"), require("advantages")
		local policy = rook.load("random:tiny")
		local opt = rook.adamw(policy, { lr = 1e-3 })
		local batch = policy:rollout({ "a", "b" }, { group = 4, max_new_tokens = 4, seed = 1 })
		batch:set_rewards{ 1, 0, 0, 0, 0, 1, 1, 0 }
		batch:set_advantages(adv.rloo(batch:rewards(), batch.group))
		local function reinforce(seqs, info) -- −A·logp per token, a mean over the minibatch's tokens
			local loss, dlogp = 0, {}
			for i, s in ipairs(seqs) do
				dlogp[i] = {}
				for t = 1, #s.logp do
					loss = loss - s.advantages[t] * s.logp[t] / info.tokens
					dlogp[i][t] = -s.advantages[t] / info.tokens
				end
			end
			return loss, dlogp
		end
		print("gradient checked:", (rook.gradcheck(reinforce)))
		local m = policy:forward_backward(batch, reinforce)
		print("first forward = sampler:", m["ratio/first_max_abs_log"] == 0)
		local u = opt:step()
		print("updates:", u.updates, "passes:", u.passes)
		print(pcall(policy.forward_backward, policy, batch, function() return 0, {} end))
	`)
	// Output:
	// gradient checked:	true
	// first forward = sampler:	true
	// updates:	1	passes:	1
	// false	example.lua:24: policy:forward_backward: loss function example.lua:24: dlogp has 0 lists for 8 completions
}
