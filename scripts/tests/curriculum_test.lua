local check = require("check")
local cur = require("curriculum")
local rook = require("rook")

local T = {}

function T.test_schedule_and_linear()
  local mix = cur.schedule{ { until_step = 10, env = 0.8 }, { until_step = 20, env = 0.5 }, { env = 0.2 } }
  check.eq(mix(1), 0.8)
  check.eq(mix(10), 0.8)
  check.eq(mix(11), 0.5)
  check.eq(mix(1000), 0.2)
  local both = cur.schedule{ { env = 0.3, phases = { "endgame" } } }
  check.eq(both(1).env, 0.3, "several values come back as the stage")
  check.errors(function() cur.schedule{ { env = 1 }, { env = 2 } } end, "only the last stage")
  local lin = cur.linear{ from = 1, to = 0, steps = 11 }
  check.eq(lin(1), 1)
  check.near(lin(6), 0.5, 1e-12)
  check.eq(lin(50), 0)
end

function T.test_phase()
  check.eq(cur.phase("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"), "opening")
  check.eq(cur.phase("r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ - 0 25"), "middlegame")
  check.eq(cur.phase("8/2p5/3p4/KP5r/1R3p1k/8/4P1P1/8 w - - 7 40"), "endgame")
end

function T.test_next_mix_and_phases()
  local data = rook.positions{ path = "../engine/chess/testdata/positions.epd", task = "policy" }
  local items = cur.next(data, 4, 0.5)
  local env = 0
  for _, it in ipairs(items) do if it.task == "A" then env = env + 1 end end
  check.eq(#items, 4)
  check.eq(env, 2, "half environment prompts")
  local ends = cur.next(data, 2, 0, { "endgame" })
  for _, it in ipairs(ends) do check.eq(cur.phase(it.fen), "endgame") end
  check.errors(function() cur.next(data, 1, 0, { "nosuchphase" }, 20) end, "no position in phases {nosuchphase}")
end

function T.test_next_excludes_positions()
  local function source() return rook.positions{ path = "../engine/chess/testdata/positions.epd", task = "policy" } end
  local first = source():next(3)
  local ex = cur.exclude({ first[1], first[3] })
  check.eq(cur.position("8/8/8/8/8/8/8/K1k5 w - - 12 80"), "8/8/8/8/8/8/8/K1k5 w - -", "move counters do not count")
  local items = cur.next(source(), 3, 0, { exclude = ex })
  check.eq(items[1].fen, first[2].fen, "the first excluded position is skipped")
  for _, it in ipairs(items) do
    check.truthy(not ex[cur.position(it.fen)], "no excluded position: " .. it.fen)
  end
  local ends = cur.next(source(), 1, 0, { phases = { "endgame" }, exclude = ex })
  check.eq(cur.phase(ends[1].fen), "endgame", "phases and exclude together")
  local all = cur.exclude(source():next(200))
  check.errors(function() cur.next(source(), 1, 0, { exclude = all, max_draws = 30 }) end,
    "no position outside the excluded set after 30 draws")
end

-- A stand-in run: the state table run:state() gives.
local function fake_run()
  local st = {}
  return { state = function() return st end }
end

-- follow_signal moves the share of A: prompts toward the task with signal, `rate` of the way a
-- step, never below `floor` for either task, and records each decision.
function T.test_follow_signal_moves_toward_signal()
  local run = fake_run()
  local mix = cur.follow_signal({ mode = "signal", window = 3, floor = 0.125, rate = 0.5 }, run, 0.5)
  local want = { 0.5, 0.25, 0.125, 0.125 } -- A: groups all tie, P: groups never: target 0
  for step = 1, 4 do
    check.eq(mix:env_fraction(step), want[step], "step " .. step)
    local m = mix:note(step, { ["no_signal/P"] = 0, ["no_signal/A"] = 1 })
    check.eq(m["curriculum/env_fraction"], want[step], "recorded at step " .. step)
    mix:observe(step, m)
  end
  -- Now P: ties as often as A: does: the target is 1/2 again, reached half a step at a time.
  for step = 5, 7 do mix:observe(step, mix:note(step, { ["no_signal/P"] = 1, ["no_signal/A"] = 1 })) end
  check.eq(mix:env_fraction(8), 0.125, "neither task has signal: the share stays")
  mix:observe(8, { ["no_signal/P"] = 0.5, ["no_signal/A"] = 0 })
  check.near(mix:env_fraction(9), 0.125 + 0.5 * ((1 / 1.5) * 1 - 0.125) * 1, 1e-15, "mean over the window")
  check.truthy(#run:state().curriculum <= 4, "records beyond the window are dropped")
  -- The other way, up to 1 − floor; a task missing from the window counts as having signal.
  check.eq(cur.follow_signal({ mode = "signal" }, fake_run(), 0.3):env_fraction(1), 0.3, "no evidence yet: the start share")
  local up = cur.follow_signal({ mode = "signal", floor = 0.25, rate = 1 }, fake_run(), 0.5)
  up:observe(1, { ["no_signal/P"] = 1 })
  check.eq(up:env_fraction(2), 0.75, "A: unseen (signal 1), P: none: 1 − floor")
end

-- Deciding a step again (after a rollback) drops the records from that step on, so the
-- decisions after it are those of a run that never took the rolled-back steps.
function T.test_follow_signal_after_rollback()
  local function steps(mix, from, to, ns_a)
    for step = from, to do mix:observe(step, mix:note(step, { ["no_signal/P"] = 0, ["no_signal/A"] = ns_a })) end
  end
  local a = cur.follow_signal({ mode = "signal", window = 4 }, fake_run())
  steps(a, 1, 3, 1)
  steps(a, 4, 6, 0) -- steps 4..6 rolled back
  steps(a, 4, 6, 1) -- and taken again
  local b = cur.follow_signal({ mode = "signal", window = 4 }, fake_run())
  steps(b, 1, 6, 1)
  check.eq(a:env_fraction(7), b:env_fraction(7))
end

function T.test_follow_signal_fixed_and_options()
  local mix = cur.follow_signal({ mode = "fixed" }, fake_run(), 0.3)
  for step = 1, 3 do
    mix:observe(step, mix:note(step, { ["no_signal/P"] = 0, ["no_signal/A"] = 1 }))
  end
  check.eq(mix:env_fraction(4), 0.3, "fixed: the start fraction whatever the signal")
  check.eq(cur.follow_signal():env_fraction(1), 0.5, "defaults: fixed at 0.5")
  check.errors(function() cur.follow_signal{ windw = 3 } end, "unknown option 'windw'")
  check.errors(function() cur.follow_signal{ mode = "greedy" } end, 'mode must be "fixed" or "signal"')
  check.errors(function() cur.follow_signal{ floor = 0.6 } end, "floor must be in [0, 0.5], got 0.6")
  check.errors(function() cur.follow_signal{ window = 1.5 } end, "window must be an integer")
  check.errors(function() cur.follow_signal{ rate = 0 } end, "rate must be in (0, 1], got 0")
  check.errors(function() cur.follow_signal({}, nil, 2) end, "env_fraction must be in [0, 1], got 2")
end

-- A run of `steps` steps that follows the signal (resuming from `resume`, saving at
-- `save_at`): A: answers all score 0 (their groups tie), P: answers by their length. Returns the
-- policy's hash and the run's metrics.
local function train_with_signal(dir, steps, save_at, resume)
  local policy = rook.load("random:tiny")
  local ref, opt = policy:reference(), rook.adamw(policy, { lr = 3e-3 })
  local data = rook.positions{ path = "../engine/chess/testdata/positions.epd", task = "mix", seed = 5 }
  local run = assert(rook.run{ dir = dir, resume = resume, policy = policy, ref = ref, opt = opt, data = data, steps = steps })
  local mix = cur.follow_signal({ mode = "signal", window = 2, floor = 0.25 }, run, 0.5)
  local recs = check.steps(run, steps, function(step)
    local b = policy:rollout(cur.next(data, 4, mix:env_fraction(step)), { group = 4, max_new_tokens = 6, seed = 100 + step, temperature = 1 })
    rook.reward.fn(b, function(prompt, text) return prompt:sub(1, 2) == "A:" and 0 or #text % 5 end)
    mix:observe(step, run:log(step, mix:note(step, rook.grpo.step(policy, ref, opt, b, { beta = 0.05 })), b))
    if step == save_at then run:save(step) end
  end)
  return policy:hash(), recs
end

-- DESIGN §6.7 for the curriculum: 6 steps == 3 steps, save, resume, 3 steps, bit for bit: the
-- same task mix at every step (its history is in the checkpoint's recipe state), the same
-- per-task no-signal fractions, the same weights.
function T.test_follow_signal_resume_is_exact()
  local recs6 = check.resumes_exactly(train_with_signal, 6,
    { "curriculum/env_fraction", "no_signal/P", "no_signal/A", "loss", "kl" })
  local moved = false
  for _, r in ipairs(recs6) do
    check.eq(r["no_signal/A"], 1, "A: groups tie")
    moved = moved or r["curriculum/env_fraction"] ~= 0.5
  end
  check.truthy(moved, "the mix moved: the test proves something")
  check.eq(recs6[6]["curriculum/env_fraction"], 0.25, "down to the floor")
end

return T
