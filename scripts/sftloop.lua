--- sftloop: supervised fine-tuning on RookWorld-format text — the loop recipes/sft.lua runs
--- and the default model is built with.
---
---   local sftloop = require("sftloop")
---   sftloop.train{ model = m, data = rook.positions{ path = "train.txt" }, steps = 300, batch = 16,
---                  adamw = { lr = 2e-3, lr_warmup = 20, lr_schedule = "cosine", lr_min_ratio = 0.05 },
---                  log = function(step, m) ... end }
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

--- train(o) runs steps o.start+1 .. o.steps and returns the optimizer. o: model, data (a
--- rook.positions source of training text), steps, batch; adamw (rook.adamw's settings, a
--- table or a section: the learning rate and its schedule, whose total_updates defaults to
--- steps) or opt (an optimizer to continue with); sft (rook.sft.step's settings, a table or a
--- section); start; log(step, metrics); mem_budget (rook.memory.budget's spec) and say(fmt,
--- ...) (told the memory plan). Unless sft.micro_tokens is set, micro-batches are sized from
--- rook.sft.plan: the whole batch unless mem_budget is too small for it.
function M.train(o)
  local rook = require("rook")
  local settings = o.sft or {}
  if (settings.micro_tokens or 0) == 0 then
    local plan = rook.sft.plan(o.model, { budget = o.mem_budget, batch = o.batch })
    if o.say then o.say("memory: %s", plan.text) end
    rook.memory.limit(plan.bytes) -- the garbage collector keeps the heap near the plan
    if plan.micro_batch < o.batch then settings.micro_tokens = plan.micro_batch * plan.seq_len end
  end
  local opt = o.opt
  if not opt then
    local adamw = o.adamw or {}
    if (adamw.total_updates or 0) == 0 then adamw.total_updates = o.steps end
    opt = rook.adamw(o.model, adamw)
  end
  for step = (o.start or 0) + 1, o.steps do
    local m = rook.sft.step(o.model, opt, M.docs(o.data:next(o.batch)), settings)
    if o.log then o.log(step, m) end
  end
  return opt
end

return M
