local check = require("check")
local dyn = require("dynamic")
local cur = require("curriculum")
local rook = require("rook")

local T = {}

local EPD = "../engine/chess/testdata/positions.epd"
local policy = rook.load("random:tiny")

-- A stand-in for a recipe's draws: each draw samples `n` new prompts of one source (group 4);
-- its groups' rewards follow ties[d + 1][g]: true, every completion 0 (the group ties); false,
-- 0 and 1 in turn (it carries a signal). Returns cfg, sample, score and the batches drawn.
local function stand_in(o, ties)
  local data = rook.positions{ path = EPD, task = "mix", seed = 3 }
  local cfg = { seed = 7, prompts = o.prompts, dynamic_sampling = o.dynamic_sampling, max_draws = o.max_draws,
                on_short = o.on_short, rollout = { group = 4, max_new_tokens = 4, temperature = 1 }, grpo = o.grpo }
  local drawn, seeds, d = {}, {}, nil
  local function sample(k)
    d = k
    seeds[#seeds + 1] = cfg.rollout.seed
    drawn[#drawn + 1] = policy:rollout(cur.next(data, o.n or o.prompts, 0.5), cfg.rollout)
    return drawn[#drawn]
  end
  local function score(b)
    local row, r = ties[d + 1] or {}, {}
    for i = 1, b.size do r[i] = row[b[i].group] and 0 or (i - 1) % 2 end
    b:set_rewards(r)
  end
  return cfg, sample, score, drawn, seeds
end

-- The prompts of a batch's groups, in order.
local function group_prompts(b)
  local out = {}
  for i, it in ipairs(b:items()) do out[i] = it.prompt end
  return out
end

function T.test_seed()
  check.eq(dyn.seed(1, 5, 0), 1 * 1000003 + 5, "draw 0: the step's seed")
  check.eq(dyn.seed(1, 5, 2), 1 * 1000003 + 5 + 2 * 2 ^ 40, "draw 2")
  -- A further draw's seed is no step's draw 0 and no other draw's in a run of fewer than 2^40 steps.
  check.truthy(dyn.seed(1, 5, 1) ~= dyn.seed(1, 5 + 2 ^ 39, 0), "draw 1 is not a later step's draw 0")
  check.truthy(dyn.seed(1, 6, 1) ~= dyn.seed(1, 5, 2), "nor another step's draw")
  check.errors(function() dyn.seed(2 ^ 40, 1, 1) end, "give no exact rollout seed")
end

-- Settings are refused by name before any draw.
function T.test_settings_refused()
  local function sample() error("sampled") end
  for _, c in ipairs({
    { { dynamic_sampling = "yes" }, "dynamic_sampling must be true or false" },
    { { dynamic_sampling = true, max_draws = 0, prompts = 2 }, "max_draws must be an integer ≥ 1, got 0" },
    { { dynamic_sampling = true, max_draws = 1.5, prompts = 2 }, "max_draws must be an integer ≥ 1, got 1.5" },
    { { dynamic_sampling = true, on_short = "stop", prompts = 2 }, 'on_short must be "proceed" or "error", got stop' },
    { { dynamic_sampling = true }, "prompts must be an integer ≥ 1, got nil" },
  }) do
    check.errors(function() dyn.fill(c[1], 1, sample, sample) end, c[2])
  end
end

-- Off: the batch is draw 0's, sampled with the step's seed, and there are no metrics.
function T.test_off_is_draw_zero()
  local cfg, sample, score, drawn, seeds = stand_in({ prompts = 2 }, { { true, true } })
  local b, m = dyn.fill(cfg, 3, sample, score)
  check.eq(#drawn, 1, "one draw")
  check.eq(b, drawn[1], "the batch is draw 0's")
  check.eq(seeds[1], 7 * 1000003 + 3, "its seed")
  check.eq(next(m), nil, "no metrics")
end

-- On: groups that tie are dropped, further draws refill the batch, and it is trimmed to
-- `prompts` groups in draw order; each kept group is its draw's, completions and rewards.
function T.test_drop_refill_trim()
  local cfg, sample, score, drawn, seeds = stand_in({ prompts = 3, dynamic_sampling = true },
    { { true, false, true }, { true, false, false }, { false, false, false } })
  local b, m = dyn.fill(cfg, 2, sample, score)
  check.eq(m["dynamic/draws"], 2, "draws")
  check.eq(m["dynamic/groups_drawn"], 6, "groups drawn")
  check.eq(m["dynamic/groups_dropped"], 3, "groups dropped")
  check.eq(m["dynamic/groups_kept"], 3, "groups kept")
  check.eq(seeds[2], dyn.seed(7, 2, 1), "draw 1's seed")
  local want = { { 1, 2 }, { 2, 2 }, { 2, 3 } } -- draw, group
  local got = group_prompts(b)
  check.eq(#got, 3, "groups")
  for i, w in ipairs(want) do
    local src = drawn[w[1]]
    check.eq(got[i], group_prompts(src)[w[2]], "group " .. i .. "'s prompt")
    for j = 1, 4 do
      local c, s = b[(i - 1) * 4 + j], src[(w[2] - 1) * 4 + j]
      check.eq(c.text, s.text, "group " .. i .. " completion " .. j)
      check.eq(c.reward, s.reward, "group " .. i .. " reward " .. j)
      check.eq(c.group, i, "its group")
    end
  end
  check.eq(b.seed, drawn[1].seed, "the first draw's seed")

  -- Trimmed to `prompts`: a draw with more groups that carry a signal than are missing.
  cfg, sample, score, drawn = stand_in({ prompts = 2, n = 3, dynamic_sampling = true }, { { true, false, true }, { false, false, false } })
  b, m = dyn.fill(cfg, 1, sample, score)
  check.eq(m["dynamic/groups_kept"], 2, "kept")
  check.eq(m["dynamic/groups_dropped"], 2, "dropped: the groups that tie, not those trimmed")
  check.eq(m["dynamic/groups_drawn"], 6, "drawn")
  check.eq(group_prompts(b)[2], group_prompts(drawn[2])[1], "the first of draw 1's")
end

-- max_draws reached short of `prompts`: "proceed" trains on what it has, "error" raises.
function T.test_max_draws_short()
  local ties = { { true, false }, { true, true } }
  local cfg, sample, score = stand_in({ prompts = 2, max_draws = 2, dynamic_sampling = true }, ties)
  local b, m = dyn.fill(cfg, 1, sample, score)
  check.eq(m["dynamic/draws"], 2, "draws")
  check.eq(m["dynamic/groups_kept"], 1, "kept")
  check.eq(#b, 4, "one group's completions")
  cfg, sample, score = stand_in({ prompts = 2, max_draws = 2, on_short = "error", dynamic_sampling = true }, ties)
  check.errors(function() dyn.fill(cfg, 1, sample, score) end,
    'step 1: 1 of 2 groups carry a reward signal after max_draws = 2 draws (3 of 4 drawn tie); on_short = "error"')
  -- None: an empty batch, which a step reports as such.
  cfg, sample, score = stand_in({ prompts = 2, max_draws = 1, dynamic_sampling = true }, { { true, true } })
  b, m = dyn.fill(cfg, 1, sample, score)
  check.eq(#b, 0, "no completions")
  check.eq(b.group, 4, "its group size")
end

-- A group ties by rook.grpo.step's rule under the settings given: rewards 1e-7 apart tie
-- for this project's tolerance, not for TRL's (trl_compat).
function T.test_signal_is_the_steps_rule()
  local data, p = rook.positions{ path = EPD, task = "mix", seed = 3 }, rook.load("random:tiny")
  local b = p:rollout(cur.next(data, 2, 0.5), { group = 4, max_new_tokens = 4, temperature = 1, seed = 3 })
  b:set_rewards({ 0, 1e-7, 0, 1e-7, 0, 1, 0, 1 })
  local s = rook.grpo.signal(b)
  check.eq(s[1], false, "1e-7 apart ties")
  check.eq(s[2], true, "0 and 1 do not")
  check.eq(rook.grpo.signal(b, { trl_compat = true })[1], true, "TRL's tolerance is 1e-8")
  check.eq(b:advantages(), nil, "the batch's advantages are left as they were")
  local m = rook.grpo.step(p, nil, rook.adamw(p), b, {})
  check.eq(m.frac_reward_zero_std, 0.5, "what the step counts")
end

-- rook.batch.join: groups by number (nil: all), in the order given; refused by name.
function T.test_join()
  local data = rook.positions{ path = EPD, task = "mix", seed = 4 }
  local o = { group = 2, max_new_tokens = 3, temperature = 1, seed = 1 }
  local b1 = policy:rollout(cur.next(data, 3, 0.5), o)
  o.seed = 2
  local b2 = policy:rollout(cur.next(data, 2, 0.5), o)
  local j = rook.batch.join({ b1, b2 }, { { 3, 1 } })
  local p1, p2, pj = group_prompts(b1), group_prompts(b2), group_prompts(j)
  check.eq(#pj, 4, "two groups of b1, all of b2")
  check.eq(pj[1], p1[3], "b1's group 3 first")
  check.eq(pj[2], p1[1], "then its group 1")
  check.eq(pj[3], p2[1], "then b2's")
  check.eq(j[1].text, b1[5].text, "group 3's first completion")
  check.eq(j.scored, false, "joined unscored")
  check.errors(function() rook.batch.join({ b1 }, { { 1, 1 } }) end, "groups[1] lists group 1 twice")
  check.errors(function() rook.batch.join({ b1 }, { { 4 } }) end, "groups[1][1] is 4: batch 1 has groups 1 to 3")
  check.errors(function() rook.batch.join({ b1, "b2" }) end, "element 2 is a string, want a rook.batch")
  check.errors(function() rook.batch.join({}) end, "no batch to join")
  o.temperature = 0.5
  local b3 = policy:rollout(cur.next(data, 1, 0.5), o)
  check.errors(function() rook.batch.join({ b1, b3 }) end, "batch 2 was sampled with another temperature")
  b1:set_rewards({ 1, 2, 3, 4, 5, 6 })
  check.errors(function() rook.batch.join({ b1, b2 }) end, "not scored, the first batch is")
end

-- The held-out positions stay excluded in every draw, as the recipe's draws exclude them.
function T.test_draws_exclude_held_out()
  local function source() return rook.positions{ generator = { seed = 3 }, task = "mix" } end
  local held_out, data = cur.exclude(source():next(12)), source() -- its first positions held out
  local cfg = { seed = 1, prompts = 2, dynamic_sampling = true, max_draws = 4, rollout = { group = 2, max_new_tokens = 3, temperature = 1 } }
  local n = 0
  local b, m = dyn.fill(cfg, 1, function()
    return policy:rollout(cur.next(data, 2, 0.5, { exclude = held_out }), cfg.rollout)
  end, function(b)
    n = n + 1
    b:set_rewards(n < 3 and { 0, 0, 0, 0 } or { 0, 1, 0, 1 })
  end)
  check.eq(m["dynamic/draws"], 3, "draws")
  for _, it in ipairs(b:items()) do check.truthy(not held_out[cur.position(it.fen)], "held out: " .. it.fen) end
end

-- A run with dynamic sampling (rewards by length, so that groups tie now and then): 4 steps
-- == 2 steps, save, resume, 2 steps, bit for bit (DESIGN §6.7): each step's draws redraw the
-- same prompts with the same seeds; and the first update of every step starts at ratio 1
-- (DESIGN §6.1: the joined batch keeps its recorded log-probabilities).
local function train(dir, steps, save_at, resume)
  local p = rook.load("random:tiny")
  local ref, opt = p:reference(), rook.adamw(p, { lr = 3e-3 })
  local data = rook.positions{ path = EPD, task = "mix", seed = 5 }
  local run = assert(rook.run{ dir = dir, resume = resume, policy = p, ref = ref, opt = opt, data = data, steps = steps })
  local cfg = { seed = 9, prompts = 3, dynamic_sampling = true, max_draws = 4, grpo = { beta = 0.05 },
                rollout = { group = 4, max_new_tokens = 6, temperature = 1 } }
  local recs = check.steps(run, steps, function(step)
    local b, dm = dyn.fill(cfg, step, function() return p:rollout(cur.next(data, cfg.prompts, 0.5), cfg.rollout) end,
      function(b) rook.reward.fn(b, function(_, text) return #text % 2 end) end)
    run:log(step, dyn.note(rook.grpo.step(p, ref, opt, b, cfg.grpo), dm), b)
    if step == save_at then run:save(step) end
  end)
  return p:hash(), recs
end

function T.test_resume_is_exact()
  local recs4 = check.resumes_exactly(train, 4,
    { "dynamic/draws", "dynamic/groups_dropped", "dynamic/groups_kept", "reward", "loss", "kl" })
  local refilled = false
  for _, r in ipairs(recs4) do
    check.eq(r["ratio/first_max_abs_log"], 0, "ratio 1 before step " .. r.step .. "'s first update")
    check.eq(r.frac_reward_zero_std, 0, "no group without signal is trained on")
    refilled = refilled or r["dynamic/draws"] > 1
  end
  check.eq(recs4[1]["kl/first_max"], 0, "KL 0 before the first update")
  check.truthy(refilled, "a step drew again: the test proves something")
end

return T
