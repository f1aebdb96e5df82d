--- recovery: what a run does when a step goes wrong. The numeric core never lets a
--- non-finite update reach the weights (the step is skipped and reported); this module decides
--- what happens next, as a policy a recipe configures and can read in one screen.
---
---   local recovery = require("recovery")
---   local rec = recovery.new({ lr_factor = 0.5, rollback_after = 2, stop_after = 4, kl_stop = 1.0 }, run)
---   ...
---   local m = rook.grpo.step(...)
---   local action = rec:check(step, m, { run = run, opt = opt })
---   if action == "stop" then run:stop(rec:report()) break end
---
--- A step is unhealthy when it is not finite (an update was skipped), or when its KL, gradient
--- norm or clip fraction passes a configured limit. On each unhealthy step the learning rate is
--- multiplied by lr_factor (if set); after rollback_after consecutive unhealthy steps the run
--- rolls back to its last good checkpoint (run:rollback(): run.step goes back with the
--- weights, and the recipe's loop repeats the steps after it); after stop_after consecutive
--- ones, as soon as the KL passes kl_stop, or when a rollback is due but cannot be done (no
--- checkpoint yet, or it does not load), the run stops with a report. A recipe passes "stop"
--- on to run:stop(rec:report()), which makes its exit code 3. A healthy step resets the count
--- (the learning rate stays where it is: recovery is not a schedule).
local M = {}

local Policy = {}
Policy.__index = Policy

-- Options and their defaults; false means "no limit".
local DEFAULTS = {
  lr_factor = 0.5,       -- multiply the learning rate by this on an unhealthy step (1: never)
  rollback_after = 2,    -- consecutive unhealthy steps before rolling back (0: never)
  stop_after = 5,        -- consecutive unhealthy steps before stopping (0: never)
  kl_max = false,        -- KL above this makes a step unhealthy
  kl_stop = false,       -- KL above this stops the run at once (an early stop, not a failure)
  grad_norm_max = false, -- pre-clip gradient norm above this makes a step unhealthy
  clip_max = false,      -- clip_ratio/region_mean above this makes a step unhealthy
}

--- new([opts [, run]]) → a policy. Given the run, its counters live in the run's state
--- (run:state().recovery): restored from it on resume, and saved with every checkpoint.
function M.new(o, run)
  local p = setmetatable({ consecutive = 0, events = {}, stopped = nil }, Policy)
  for k, v in pairs(DEFAULTS) do p[k] = v end
  for k, v in pairs(o or {}) do
    if DEFAULTS[k] == nil then error("recovery.new: unknown option '" .. tostring(k) .. "'", 2) end
    p[k] = v
  end
  if run then
    p.run_state = run:state()
    p:restore(p.run_state.recovery)
  end
  return p
end

--- problems(m) → list of reasons the step is unhealthy (empty when healthy).
function Policy:problems(m)
  local out = {}
  if m.finite == false then
    out[#out + 1] = "non-finite loss or gradient (update skipped)"
  end
  if self.kl_max and m.kl and m.kl > self.kl_max then
    out[#out + 1] = string.format("kl %.4g > kl_max %.4g", m.kl, self.kl_max)
  end
  if self.grad_norm_max and m.grad_norm and m.grad_norm > self.grad_norm_max then
    out[#out + 1] = string.format("grad_norm %.4g > grad_norm_max %.4g", m.grad_norm, self.grad_norm_max)
  end
  local clip = m["clip_ratio/region_mean"]
  if self.clip_max and clip and clip > self.clip_max then
    out[#out + 1] = string.format("clip fraction %.3f > clip_max %.3f", clip, self.clip_max)
  end
  return out
end

local function note(self, step, action, why)
  self.events[#self.events + 1] = { step = step, action = action, why = why }
end

--- check(step, m, ctx) → "ok", "skip", "rollback" or "stop", after doing it. ctx.opt is the
--- optimizer (for the learning rate), ctx.run the run (for rollback). After "rollback" the
--- recipe continues from ctx.run.step, the step of the weights it went back to.
local decide

function Policy:check(step, m, ctx)
  local action = decide(self, step, m, ctx or {})
  if self.run_state then self.run_state.recovery = self:state() end
  return action
end

function decide(self, step, m, ctx)
  if self.kl_stop and m.kl and m.kl > self.kl_stop then
    self.stopped = string.format("early stop at step %d: kl %.4g > kl_stop %.4g", step, m.kl, self.kl_stop)
    note(self, step, "stop", self.stopped)
    return "stop"
  end
  local problems = self:problems(m)
  if #problems == 0 then
    self.consecutive = 0
    return "ok"
  end
  self.consecutive = self.consecutive + 1
  local why = table.concat(problems, "; ")
  if self.stop_after > 0 and self.consecutive >= self.stop_after then
    self.stopped = string.format("stopped at step %d after %d unhealthy steps in a row: %s", step, self.consecutive, why)
    note(self, step, "stop", why)
    return "stop"
  end
  if ctx.opt and self.lr_factor ~= 1 then
    ctx.opt:scale_lr(self.lr_factor)
    note(self, step, string.format("lr → %.3g", ctx.opt:lr()), why)
  end
  if ctx.run and self.rollback_after > 0 and self.consecutive % self.rollback_after == 0 then
    local ok, back = pcall(ctx.run.rollback, ctx.run)
    if not ok then
      self.stopped = string.format("stopped at step %d: a rollback was due but failed: %s", step, tostring(back))
      note(self, step, "stop", why)
      return "stop"
    end
    note(self, step, "rollback to step " .. tostring(back), why)
    return "rollback"
  end
  note(self, step, "skip", why)
  return "skip"
end

--- report() → a text summary of every recovery action, and why the run stopped if it did.
function Policy:report()
  local lines = { "recovery report:" }
  if #self.events == 0 then lines[#lines + 1] = "  no unhealthy step" end
  for _, e in ipairs(self.events) do
    lines[#lines + 1] = string.format("  step %d: %s (%s)", e.step, e.action, e.why)
  end
  if self.stopped then lines[#lines + 1] = "  " .. self.stopped end
  return table.concat(lines, "\n")
end

--- state() / restore(s): the policy's counters, for a recipe's checkpointed state.
function Policy:state() return { consecutive = self.consecutive, events = self.events } end
function Policy:restore(s)
  if s then self.consecutive, self.events = s.consecutive or 0, s.events or {} end
end

return M
