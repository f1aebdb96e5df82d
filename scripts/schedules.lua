--- schedules: KL-coefficient (β) warm-ups, an adaptive KL controller and a learning-rate
--- schedule, as plain functions of the step so a resumed run continues exactly.
---
---   local sched = require("schedules")
---   local beta = sched.kl_warmup(step, cfg)        -- cfg.beta, cfg.kl_warmup, cfg.kl_schedule
---   local ctl  = sched.adaptive_kl{ target = 0.02, init = 0.01 }
---   beta = ctl:update(m.kl)                        -- after each step; ctl.beta is the value
---
--- A GRPO step's learning rate is its optimizer's: rook.adamw{ lr =, lr_schedule =,
--- lr_warmup =, total_updates = } shapes it per update and a checkpoint carries it. sched.lr
--- is for loops that pass an explicit rate (rook.sft.step's lr option).
local M = {}

--- β at `step` (1-based) growing to `cfg.beta` (`cfg.kl_coef`, its older name):
---   "constant": beta from the first step;
---   "linear":   beta · min(1, step / kl_warmup);
---   "step":     0 before kl_warmup, beta from then on.
function M.kl_warmup(step, cfg)
  local target = cfg.beta or cfg.kl_coef or 0
  local warm = cfg.kl_warmup or 0
  local kind = cfg.kl_schedule or "linear"
  if kind == "constant" or warm <= 0 then
    return target
  elseif kind == "linear" then
    return target * math.min(1, step / warm)
  elseif kind == "step" then
    if step < warm then return 0 end
    return target
  end
  error("schedules.kl_warmup: unknown kl_schedule '" .. tostring(kind) .. "' (constant, linear or step)", 2)
end

--- Learning rate at `step` (1-based) for a loop that passes it explicitly: linear warm-up over
--- cfg.lr_warmup steps to cfg.lr, then "constant" or "cosine" decay to cfg.lr_min (default 0)
--- at cfg.steps.
function M.lr(step, cfg)
  local peak = cfg.lr
  local warm = cfg.lr_warmup or 0
  local kind = cfg.lr_schedule or "constant"
  if warm > 0 and step <= warm then
    return peak * step / warm
  end
  if kind == "constant" then
    return peak
  elseif kind == "cosine" then
    local total = cfg.steps
    local floor = cfg.lr_min or 0
    if step >= total then return floor end
    local p = (step - warm) / math.max(1, total - warm)
    return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * p))
  end
  error("schedules.lr: unknown lr_schedule '" .. tostring(kind) .. "' (constant or cosine)", 2)
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
