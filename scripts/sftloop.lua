--- sftloop: supervised fine-tuning on RookWorld-format text — the loop recipes/sft.lua runs
--- and the default model is built with.
---
---   local sftloop = require("sftloop")
---   sftloop.train{ model = m, data = rook.positions{ path = "train.txt" }, steps = 300, batch = 16,
---                  lr = 2e-3, lr_warmup = 20, lr_min = 2e-4, log = function(step, m) ... end }
local M = {}

--- docs(items) → SFT documents {prompt=, target=} from training-string items. Prompt and
--- target are tokenized separately, as a rollout sees them.
function M.docs(items)
  local docs = {}
  for i, it in ipairs(items) do
    assert(it.target, "sftloop: item " .. tostring(it.origin) .. " has no target (want a training-text source)")
    docs[i] = { prompt = it.prompt, target = it.target }
  end
  return docs
end

--- plan(o) → rook.memory.plan's result for SFT on o.model: micro-batches of documents of up
--- to o.seq_len tokens (the model's context by default), o.batch per step, within
--- o.mem_budget (rook.memory.budget's spec; "" or nil: the default share of RAM).
function M.plan(o)
  return require("rook").memory.plan(o.model, { budget = o.mem_budget, seq_len = o.seq_len,
    scored = o.seq_len or 1e9, sequences = o.batch })
end

--- train(o) runs steps o.start+1 .. o.steps and returns the optimizer. o: model, data (a
--- rook.positions source of training text), steps, batch, lr, lr_warmup, lr_min,
--- lr_schedule ("cosine" by default), weight_decay, max_grad_norm, loss_on ("completion",
--- the default, or "all" to learn the prompts too), opt (to continue with an existing
--- optimizer), start, log(step, metrics), micro_tokens (tokens per forward; nil or 0: from
--- plan(o), the whole batch unless o.mem_budget is too small for it), say(fmt, ...) (told
--- the memory plan).
function M.train(o)
  local rook = require("rook")
  local sched = require("schedules")
  local micro_tokens = o.micro_tokens ~= 0 and o.micro_tokens or nil
  if not micro_tokens then
    local plan = M.plan(o)
    if o.say then o.say("memory: %s", plan.text) end
    rook.memory.limit(plan.bytes) -- the garbage collector keeps the heap near the plan
    if plan.micro_batch < o.batch then micro_tokens = plan.micro_batch * plan.seq_len end
  end
  local opt = o.opt or rook.adamw(o.model, { lr = o.lr, betas = { 0.9, 0.95 }, weight_decay = o.weight_decay or 0 })
  local lrs = { lr = o.lr, lr_warmup = o.lr_warmup or 0, lr_schedule = o.lr_schedule or "cosine",
                lr_min = o.lr_min or 0, steps = o.steps }
  for step = (o.start or 0) + 1, o.steps do
    local items = o.data:next(o.batch)
    local m = rook.sft.step(o.model, opt, M.docs(items), {
      lr = sched.lr(step, lrs), max_grad_norm = o.max_grad_norm or 1, micro_tokens = micro_tokens,
      loss_on = o.loss_on or "completion" })
    if o.log then o.log(step, m) end
  end
  return opt
end

return M
