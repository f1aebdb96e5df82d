local check = require("check")
local rook = require("rook")

local T = {}

-- rook.sft.step and rook.sft.loss read their options strictly, naming the key.
function T.test_sft_options()
  local m = rook.load("random:tiny")
  local opt = rook.adamw(m, { lr = 1e-3 })
  local docs = { { prompt = "P: abc", target = " M: e2e4" } }
  local completion = rook.sft.loss(m, docs)
  local all = rook.sft.loss(m, docs, { loss_on = "all", micro_tokens = 4 })
  check.truthy(completion ~= all, "loss_on = all learns the prompt's tokens too")
  check.errors(function() rook.sft.loss(m, docs, { loss_on = "prompt" }) end, 'rook.sft.loss: loss_on "prompt" is not completion or all')
  check.errors(function() rook.sft.loss(m, docs, { lr = 1 }) end, 'rook.sft.loss: unknown option "lr"')
  check.errors(function() rook.sft.step(m, opt, docs, { max_grad_nrom = 1 }) end,
    'rook.sft.step: unknown option "max_grad_nrom" (did you mean "max_grad_norm"?)')
  check.errors(function() rook.sft.step(m, opt, docs, { micro_tokens = 1.5 }) end, 'rook.sft.step: option "micro_tokens": want an integer, got 1.5')
  local r = rook.sft.step(m, opt, docs, { max_grad_norm = 0.5 })
  check.eq(r.lr, 1e-3, "the optimizer's rate by default")
  check.eq(r.finite, true)
end

return T
