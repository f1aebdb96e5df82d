--- schedules: KL-coefficient (β) warm-ups and an adaptive KL controller, as plain functions of
--- the step so a resumed run continues exactly. A recipe sets the value it gets on its grpo
--- section (cfg.grpo.beta = ...), which checks it.
---
---   local sched = require("schedules")
---   local target = cfg.grpo.beta                   -- the config's β, read before the loop
---   cfg.grpo.beta = sched.kl_warmup(step, target, cfg.kl_warmup, cfg.kl_schedule)
---   local ctl  = sched.adaptive_kl{ target = 0.02, init = 0.01 }
---   cfg.grpo.beta = ctl:update(m.kl)               -- after each step; ctl.beta is the value
---
--- The learning rate's schedule is the optimizer's (rook.adamw: lr_warmup, lr_schedule,
--- total_updates, lr_min_ratio), per update, carried by every checkpoint.
local M = {}

--- β at `step` (1-based) growing to `beta` over `warmup` steps; `kind`:
---   "constant": beta from the first step;
---   "linear":   beta · min(1, step / warmup) (the default);
---   "step":     0 before step `warmup`, beta from then on.
function M.kl_warmup(step, beta, warmup, kind)
  local warm = warmup or 0
  kind = kind or "linear"
  if kind == "constant" or warm <= 0 then
    return beta
  elseif kind == "linear" then
    return beta * math.min(1, step / warm)
  elseif kind == "step" then
    if step < warm then return 0 end
    return beta
  end
  error("schedules.kl_warmup: unknown kind '" .. tostring(kind) .. "' (constant, linear or step)", 2)
end

--- Adaptive KL controller (Ziegler et al. 2019, as in TRL's AdaptiveKLController): moves β
--- proportionally to how far the measured KL is from the target, clipped to ±20% per update.
local Adaptive = {}
Adaptive.__index = Adaptive

function M.adaptive_kl(o)
  assert(type(o) == "table" and o.target, "schedules.adaptive_kl{ target = ..., init = ..., horizon = ... }")
  return setmetatable({ beta = o.init or 0.01, target = o.target, horizon = o.horizon or 10000,
                        batch = o.batch or 1 }, Adaptive)
end

function Adaptive:update(kl)
  if kl == nil or kl ~= kl then return self.beta end -- no measurement, or NaN: keep β
  local err = math.max(-0.2, math.min(0.2, kl / self.target - 1))
  self.beta = self.beta * (1 + err * self.batch / self.horizon)
  return self.beta
end

--- The controller's state, for a recipe's checkpointed state table.
function Adaptive:state() return { beta = self.beta } end
function Adaptive:restore(s) if s and s.beta then self.beta = s.beta end end

return M
