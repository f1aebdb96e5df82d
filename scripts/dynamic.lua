--- dynamic: DAPO's dynamic sampling (Yu et al. 2025, §3.2), as verl's algorithm.filter_groups
--- with max_num_gen_batches. A group whose rewards tie gets advantages of 0 and teaches the
--- policy nothing; dynamic sampling drops such groups and draws groups of new prompts until the
--- batch holds `prompts` groups that carry a signal, or until `max_draws` draws, then trains on
--- the first `prompts` of them (verl trims the same way).
---
---   local dyn = require("dynamic")
---   local batch, dm = dyn.fill(cfg, step, function() -- new prompts, sampled with the draw's seed
---     return policy:rollout(cur.next(data, cfg.prompts, cfg.env_fraction), cfg.rollout)
---   end, function(b) rook.reward.chess(b, cfg.reward, sf) end)   -- and scored
---   local m = run:log(step, dyn.note(rook.grpo.step(policy, ref, opt, batch, cfg.grpo), dm), batch)
---
--- A group ties by rook.grpo.step's own rule under cfg.grpo (rook.grpo.signal), on the whole
--- batch in a data-parallel run, so the groups dropped are those the step would find without
--- signal (frac_reward_zero_std).
local M = {}

local SHORT = { proceed = true, error = true }

-- settings(cfg) → cfg's dynamic sampling settings with their defaults, each checked by name.
local function settings(cfg)
  local o = { dynamic_sampling = cfg.dynamic_sampling, max_draws = cfg.max_draws or 3,
              on_short = cfg.on_short or "proceed", prompts = cfg.prompts }
  if o.dynamic_sampling == nil then o.dynamic_sampling = false end
  local function int(v) return type(v) == "number" and v == math.floor(v) and v >= 1 end
  if type(o.dynamic_sampling) ~= "boolean" then
    error("dynamic.fill: dynamic_sampling must be true or false, got " .. tostring(o.dynamic_sampling), 3)
  elseif not int(o.max_draws) then
    error("dynamic.fill: max_draws must be an integer ≥ 1, got " .. tostring(o.max_draws), 3)
  elseif not SHORT[o.on_short] then
    error("dynamic.fill: on_short must be \"proceed\" or \"error\", got " .. tostring(o.on_short), 3)
  elseif o.dynamic_sampling and not int(o.prompts) then
    error("dynamic.fill: prompts must be an integer ≥ 1, got " .. tostring(o.prompts), 3)
  end
  return o
end

--- seed(seed, step, d) → the rollout seed of draw d (0, 1, …) of step: seed·1000003 + step +
--- d·2^40. Draw 0 keeps the step's seed of a run without dynamic sampling; a further draw's
--- depends only on (seed, step, d) and is no step's draw 0 nor another draw of a run of fewer
--- than 2^40 steps. It must be an integer below 2^53 (exact in a Lua number).
function M.seed(seed, step, d)
  local s = seed * 1000003 + step + d * 2 ^ 40
  if not (type(s) == "number" and s == math.floor(s) and s >= 0 and s < 2 ^ 53) or step >= 2 ^ 40 then
    error(string.format("dynamic.seed: seed %s, step %s, draw %s give no exact rollout seed (want an integer below 2^53)",
      tostring(seed), tostring(step), tostring(d)), 2)
  end
  return s
end

--- fill(cfg, step, sample, score) → batch, metrics: the step's batch. cfg is the recipe's
--- config, read for dynamic_sampling (default false), max_draws (3), on_short ("proceed"),
--- prompts, seed, rollout and grpo. Draw d (0, 1, …) sets cfg.rollout.seed to seed(cfg.seed,
--- step, d), then calls sample(d), which returns a batch of new prompts sampled with
--- cfg.rollout, and score(batch), which scores it. Without dynamic sampling the batch is draw
--- 0's and metrics is empty. With it, each draw's groups that tie
--- (rook.grpo.signal(batch, cfg.grpo)) are dropped and draws go on until the kept groups number
--- prompts or max_draws draws are made; the batch is the first prompts kept groups, in draw
--- order (rook.batch.join). Fewer: on_short "proceed" trains on those it has (rook.log says
--- so), "error" raises. metrics: dynamic/draws, dynamic/groups_drawn, dynamic/groups_dropped
--- (those that tie, of those drawn) and dynamic/groups_kept.
function M.fill(cfg, step, sample, score)
  local o = settings(cfg)
  local rook = require("rook")
  local function draw(d)
    cfg.rollout.seed = M.seed(cfg.seed, step, d)
    local b = sample(d)
    if type(b) ~= "userdata" or not string.find(tostring(b), "^rook%.batch%(") then
      error(string.format("dynamic.fill: sample(%d) returned %s, want a rook.batch", d, tostring(b)), 3)
    end
    score(b)
    if not b.scored then error(string.format("dynamic.fill: score left draw %d's batch unscored", d), 3) end
    return b
  end
  if not o.dynamic_sampling then return draw(0), {} end
  local parts, picks, kept, drawn, dropped = {}, {}, 0, 0, 0
  for d = 0, o.max_draws - 1 do
    local b = draw(d)
    local keep = {}
    for g, signal in ipairs(rook.grpo.signal(b, cfg.grpo)) do
      if not signal then
        dropped = dropped + 1
      elseif kept < o.prompts then -- past the prompts-th, trimmed
        kept = kept + 1
        keep[#keep + 1] = g
      end
      drawn = drawn + 1
    end
    parts[#parts + 1], picks[#picks + 1] = b, keep
    if kept == o.prompts then break end
  end
  local m = { ["dynamic/draws"] = #parts, ["dynamic/groups_drawn"] = drawn, ["dynamic/groups_dropped"] = dropped,
              ["dynamic/groups_kept"] = kept }
  if kept < o.prompts then
    local what = string.format("step %d: %d of %d groups carry a reward signal after max_draws = %d draws (%d of %d drawn tie)",
      step, kept, o.prompts, #parts, dropped, drawn)
    if o.on_short == "error" then error("dynamic.fill: " .. what .. "; on_short = \"error\"", 2) end
    rook.log("dynamic sampling: %s; training on those %d (on_short = \"proceed\")", what, kept)
  end
  return rook.batch.join(parts, picks), m
end

--- note(metrics, dm) → metrics with fill's metrics dm added (for run:log).
function M.note(m, dm)
  for k, v in pairs(dm) do m[k] = v end
  return m
end

return M
