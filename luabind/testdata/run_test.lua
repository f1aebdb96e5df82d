local check = require("check")
local rook = require("rook")

local T = {}

local EPD = "../engine/chess/testdata/positions.epd"

local tmpdir = check.tmpdir

-- One training run of `steps` steps (resuming from `resume` if given), saving at `save_at`.
-- o.ref_after_resume: take the reference as a copy of the policy after rook.run (the mistake
-- the run must refuse); o.run_ref: take it from run.ref. Returns the policy's hash, the KL of
-- each step, the recipe state, the reference's hash and the (closed) run.
local function train(dir, steps, save_at, resume, o)
  o = o or {}
  local policy = rook.load("random:tiny")
  local ref = (o.ref_after_resume or o.run_ref) and nil or policy:reference()
  local opt = rook.adamw(policy, { lr = 3e-3 })
  local data = rook.positions{ path = EPD, task = "mix", seed = 5 }
  local run, err = rook.run{ dir = dir, resume = resume, policy = policy, ref = ref, opt = opt, data = data, steps = steps }
  assert(run, err)
  if o.ref_after_resume then ref = policy:reference() end
  if o.run_ref then ref = run.ref end
  local state = run:state()
  local seen = state.seen or 0
  local kl = {}
  local ok, err = pcall(function()
    for step = run.step + 1, steps do
      local b = policy:rollout(data:next(2), { group = 4, max_new_tokens = 6, seed = 100 + step, temperature = 1 })
      rook.reward.fn(b, function(_, text) return #text % 5 end)
      local m = rook.grpo.step(policy, ref, opt, b, { beta = 0.05 })
      run:log(step, m)
      seen = seen + b.size
      kl[step] = m.kl
      if step == save_at then run:save(step, { state = { seen = seen } }) end
    end
  end)
  run:close()
  if not ok then error(err, 0) end
  return policy:hash(), kl, seen, ref:hash(), run
end

-- DESIGN §6.7 through the Lua surface: 4 steps == 2 steps, save, resume, 2 steps, bit for bit,
-- including the KL to a reference reloaded from its source after the resume.
function T.test_resume_is_exact()
  local h4, kl4, seen4, ref4 = train(tmpdir(), 4, nil)
  local dir = tmpdir()
  train(dir, 2, 2)
  local h, kl, seen, ref, run = train(nil, 4, nil, dir)
  check.truthy(run.resumed, "resumed")
  check.eq(h, h4, "weights after resume equal the continuous run's")
  check.eq(kl[3], kl4[3], "KL at the first step after resume")
  check.eq(kl[4], kl4[4], "KL at the second step after resume")
  check.eq(seen, seen4, "recipe state restored")
  check.eq(ref, ref4, "the reference is the start model, not the resumed policy")
  local recs = run:metrics()
  check.eq(#recs, 4, "metrics of every step are in metrics.jsonl")
end

-- A crash after logging steps the checkpoint does not hold: the resumed run logs them again,
-- and metrics.jsonl holds each step once.
function T.test_resume_after_crash_logs_each_step_once()
  local dir = tmpdir()
  train(dir, 3, 2) -- saves at 2, logs 3, "crashes"
  local _, _, _, _, run = train(nil, 4, nil, dir)
  local steps = {}
  for _, r in ipairs(run:metrics()) do steps[#steps + 1] = tostring(r.step) end
  check.eq(table.concat(steps, " "), "1 2 3 4", "steps in metrics.jsonl")
end

-- GRPO correctness: a reference copied from the policy after a resume is the resumed weights
-- (KL ≡ 0). It is labelled as a trained copy, rook.grpo.step refuses it naming both hashes,
-- and run.ref is the reference the run recorded, with the KL of the continuous run.
function T.test_reference_after_resume()
  local _, kl3 = train(tmpdir(), 3, nil)
  local dir = tmpdir()
  train(dir, 2, 2)
  local err = check.errors(function() train(nil, 3, nil, dir, { ref_after_resume = true }) end,
                           "is not run " .. dir .. "'s recorded KL reference")
  check.truthy(string.find(err, "trained copy", 1, true), "the copy is labelled as trained: " .. err)
  check.truthy(select(2, string.gsub(err, "hash %x%x%x%x%x%x%x%x%x%x%x%x", "")) == 2, "both hashes named: " .. err)
  local _, kl = train(nil, 3, nil, dir, { run_ref = true })
  check.eq(kl[3], kl3[3], "KL after resume against run.ref equals the continuous run's")
  check.truthy(kl3[3] > 0, "the step has a KL to measure")
end

-- GRPO correctness: the run is the only way to move its reference. ref:sync on a run's
-- reference is refused; a reference synced outside the run is refused by rook.grpo.step;
-- run:sync_reference is recorded, and the same batch after a resume gives the same KL.
function T.test_reference_moves_only_through_the_run()
  local dir = tmpdir()
  local policy = rook.load("random:tiny")
  local ref = policy:reference()
  local opt = rook.adamw(policy, { lr = 1e-2 })
  local run = assert(rook.run{ dir = dir, policy = policy, ref = ref, opt = opt })
  local function batch()
    local b = policy:rollout({ "a", "b" }, { group = 4, max_new_tokens = 4, seed = 7 })
    b:set_rewards({ 1, 0, 0, 1, 0, 1, 1, 0 })
    return b
  end
  rook.grpo.step(policy, ref, opt, batch(), { beta = 0.1 })
  run:log(1, {})
  check.errors(function() ref:sync(policy) end, "run:sync_reference")
  local loose = rook.load("random:tiny"):reference() -- the run's start weights, in no run
  rook.grpo.step(policy, loose, opt, batch(), { beta = 0.1 }) -- accepted: the recorded weights
  run:log(2, {})
  loose:sync(policy) -- a reference of no run may be synced; it is then not this run's reference
  check.errors(function() rook.grpo.step(policy, loose, opt, batch(), { beta = 0.1 }) end, "recorded KL reference")
  local synced = run:sync_reference(2)
  check.eq(ref:hash(), synced, "synced")
  run:save(2)
  local want = rook.grpo.step(policy, ref, opt, batch(), { beta = 0.1 }).kl
  run:close()

  local p2 = rook.load("random:tiny")
  local opt2 = rook.adamw(p2, { lr = 1e-2 })
  local run2 = assert(rook.run{ resume = dir, policy = p2, opt = opt2 })
  check.eq(run2.ref:hash(), synced, "run.ref is the synced reference")
  local b = p2:rollout({ "a", "b" }, { group = 4, max_new_tokens = 4, seed = 7 })
  b:set_rewards({ 1, 0, 0, 1, 0, 1, 1, 0 })
  local got = rook.grpo.step(p2, run2.ref, opt2, b, { beta = 0.1 }).kl
  check.eq(got, want, "KL after resume to the synced reference")
  run2:close()
end

local function read(path)
  local f = assert(io.open(path))
  local s = f:read("*a")
  f:close()
  return s
end

-- A policy trained in this process before rook.run (here one SFT step).
local function trained()
  local policy = rook.load("random:tiny")
  local opt = rook.adamw(policy, { lr = 1e-2 })
  rook.sft.step(policy, opt, { { prompt = "P: abc", target = " M: e2e4" } })
  return policy, opt
end

local function scored(policy)
  local b = policy:rollout({ "a", "b" }, { group = 4, max_new_tokens = 4, seed = 7 })
  b:set_rewards({ 1, 0, 0, 1, 0, 1, 1, 0 })
  return b
end

-- GRPO correctness (DESIGN §6.6): a policy trained before rook.run and given no reference does
-- not start from its source's weights, so run.ref — the source — would measure a KL to weights
-- the policy never started from. run.ref refuses, before and after a resume, and the
-- checkpoint records the policy's start; a sync, or a reference given to rook.run, is a choice.
function T.test_reference_of_a_policy_trained_before_the_run()
  local dir = tmpdir()
  local policy, opt = trained()
  local start = policy:hash()
  local run = assert(rook.run{ dir = dir, policy = policy, opt = opt })
  check.errors(function() return run.ref end, "its policy started from weights trained before the run (hash " .. string.sub(start, 1, 12))
  run:save(0)
  run:close()
  local state = read(dir .. "/checkpoints/step-00000000/state.json")
  check.truthy(string.find(state, '"policy_start": "' .. start .. '"', 1, true), "the checkpoint records the policy's start")

  local p2 = rook.load("random:tiny")
  local none, err = rook.run{ resume = dir, policy = p2, opt = rook.adamw(p2, { lr = 1e-2 }), ref = p2:reference() }
  check.eq(none, nil, "a resume given a reference now")
  check.truthy(string.find(err, "the reference given now would hold the source's weights", 1, true), err)
  local run2 = assert(rook.run{ resume = dir, policy = p2, opt = rook.adamw(p2, { lr = 1e-2 }) })
  check.errors(function() return run2.ref end, "given no reference")
  local synced = run2:sync_reference(0)
  check.eq(run2.ref:hash(), synced, "after a sync, run.ref is the synced reference")
  run2:close()

  -- The weights the run starts from, given as the reference.
  policy, opt = trained()
  run = assert(rook.run{ dir = tmpdir(), policy = policy, opt = opt, ref = policy:reference() })
  check.eq(run.ref:hash(), policy:hash(), "ref = policy:reference()")
  rook.grpo.step(policy, run.ref, opt, scored(policy), { beta = 0.1 })
  run:close()
  -- The source's weights, loaded as the reference.
  policy, opt = trained()
  local source = rook.load("random:tiny"):reference()
  run = assert(rook.run{ dir = tmpdir(), policy = policy, opt = opt, ref = source })
  check.eq(run.ref:hash(), source:hash(), "ref = the source's reference")
  rook.grpo.step(policy, run.ref, opt, scored(policy), { beta = 0.1 })
  run:close()
end

-- A reference from another source than the policy's is recorded under its own identity — its
-- source and hash, not the policy's source synced to its weights — and a resume reloads it from
-- there. A trained copy is recorded as synced at step 0, with its weights in the checkpoint.
function T.test_foreign_reference_keeps_its_identity()
  local dir = tmpdir()
  local policy = rook.load("random:tiny")
  local foreign = rook.load("random:tiny@seed=7"):reference()
  local run = assert(rook.run{ dir = dir, policy = policy, opt = rook.adamw(policy), ref = foreign })
  run:save(0)
  run:close()
  local state = read(dir .. "/checkpoints/step-00000000/state.json")
  check.truthy(string.find(state, '"source": "random:tiny@seed=7"', 1, true), "recorded under its own source: " .. state)
  check.truthy(string.find(state, '"hash": "' .. foreign:hash() .. '"', 1, true), "with its own hash")
  check.truthy(string.find(state, '"syncs": []', 1, true), "not as a sync of the policy's source")
  check.eq(io.open(dir .. "/checkpoints/step-00000000/reference/config.json"), nil, "no reference weights stored: its source reloads them")

  local p2 = rook.load("random:tiny")
  local run2 = assert(rook.run{ resume = dir, policy = p2, opt = rook.adamw(p2) })
  check.eq(run2.ref:hash(), foreign:hash(), "the resumed run's reference")
  check.eq(run2.ref.source, "random:tiny@seed=7", "labelled with its own source")
  run2:close()

  local copy = trained():reference()
  dir = tmpdir()
  local p3 = rook.load("random:tiny@seed=3")
  run = assert(rook.run{ dir = dir, policy = p3, opt = rook.adamw(p3), ref = copy })
  run:save(0)
  run:close()
  state = read(dir .. "/checkpoints/step-00000000/state.json")
  check.truthy(string.find(state, '"source": "random:tiny@seed=42"', 1, true), "a trained copy: its own source, " .. state)
  check.truthy(io.open(dir .. "/checkpoints/step-00000000/reference/config.json"), "synced at step 0: its weights are stored")
  local p4 = rook.load("random:tiny@seed=3")
  run2 = assert(rook.run{ resume = dir, policy = p4, opt = rook.adamw(p4) })
  check.eq(run2.ref:hash(), copy:hash(), "the trained copy comes back from the checkpoint")
  check.eq(run2.ref.source, "random:tiny@seed=42 (trained copy " .. string.sub(copy:hash(), 1, 12) .. ")", "labelled as a trained copy")
  run2:close()
end

-- Rollback: raises without a checkpoint; brings the step back with the weights; the records
-- of the steps it undoes leave metrics.jsonl.
function T.test_rollback()
  local dir = tmpdir()
  local policy = rook.load("random:tiny")
  local ref = policy:reference()
  local opt = rook.adamw(policy, { lr = 1e-2 })
  local run, err = rook.run{ dir = dir, policy = policy, ref = ref, opt = opt }
  assert(run, err)
  check.errors(function() run:rollback() end, "no checkpoint saved yet in " .. dir)
  run:log(1, { loss = 1 })
  run:save(1)
  local saved, adam = policy:hash(), opt:steps()
  local b = policy:rollout({ "a" }, { group = 4, max_new_tokens = 4, seed = 1 })
  b:set_rewards({ 1, 0, 0, 1 })
  rook.grpo.step(policy, ref, opt, b)
  run:log(2, { loss = 2 })
  check.truthy(policy:hash() ~= saved, "trained")
  check.eq(run.step, 2)
  check.eq(run:rollback(), 1)
  check.eq(run.step, 1, "the step came back with the weights")
  check.eq(policy:hash(), saved, "rolled back")
  check.eq(opt:steps(), adam, "Adam's step came back")
  check.eq(#run:metrics(), 1, "the undone step's record left metrics.jsonl")
  check.errors(function() run:save(0) end, "the run is at step 1")
  run:close()
end

-- Saving: a failure raises an error naming the file and the cause; a second writer is refused
-- while a run holds the directory; a closed run's directory is not reused by a new run.
function T.test_save_failure_and_ownership()
  local dir = tmpdir()
  local policy = rook.load("random:tiny")
  local opt = rook.adamw(policy, { lr = 1e-2 })
  local run = assert(rook.run{ dir = dir, policy = policy, opt = opt })
  run:save(1)
  check.errors(function() rook.run{ dir = dir, policy = policy, opt = opt } end, "already belongs to run")
  local other = rook.load("random:tiny")
  local _, lerr = rook.run{ dir = dir, policy = other, opt = rook.adamw(other) }
  check.truthy(string.find(lerr, "is in use by this process", 1, true), "second writer refused: " .. tostring(lerr))
  -- A file where the checkpoints directory should be (root ignores permissions, not this).
  assert(os.rename(dir .. "/checkpoints", dir .. "/checkpoints.moved"))
  assert(io.open(dir .. "/checkpoints", "w")):close()
  local err = check.errors(function() run:save(2) end, "run:save(2): saving checkpoint step-00000002 in " .. dir)
  check.truthy(string.find(err, dir .. "/checkpoints", 1, true) and string.find(err, "not a directory", 1, true), err)
  os.remove(dir .. "/checkpoints")
  assert(os.rename(dir .. "/checkpoints.moved", dir .. "/checkpoints"))
  run:save(2)
  run:close()
  check.errors(function() run:save(3) end, "is closed")
  local _, rerr = rook.run{ dir = dir, policy = policy, opt = opt }
  check.truthy(string.find(rerr, "already holds checkpoints", 1, true), "a run directory is not reused: " .. tostring(rerr))
  check.errors(function() rook.run{ dir = dir, policy = policy, opt = rook.adamw(rook.load("random:tiny")) } end, "not the policy's optimizer")
end

-- rook.config checks a config's run_dir as rook.run would, before a recipe loads its model: a
-- new run where checkpoints are, another writer (here: a run still open in this process).
function T.test_config_checks_run_dir()
  local fresh = tmpdir()
  rook.config{ run_dir = fresh }
  check.eq(io.open(fresh .. "/lock"), nil, "the check creates nothing")
  local dir = tmpdir()
  train(dir, 2, 2)
  check.errors(function() rook.config{ run_dir = dir } end, "run_dir: " .. dir .. " already holds checkpoints (step-00000002): resume it or choose another directory")
  local busy = tmpdir()
  local policy = rook.load("random:tiny")
  local run = assert(rook.run{ dir = busy, policy = policy, opt = rook.adamw(policy, { lr = 1e-3 }), steps = 2 })
  check.errors(function() rook.config{ run_dir = busy } end, "is in use by this process")
  run:close()
  rook.config{ run_dir = busy }
end

-- rook.run_state reads the recipe state of a run's newest checkpoint without opening the run:
-- while it is open, and after.
function T.test_run_state()
  local dir = tmpdir() .. "/r"
  local policy = rook.load("random:tiny")
  local run = assert(rook.run{ dir = dir, policy = policy, opt = rook.adamw(policy), steps = 3 })
  check.eq(select(1, rook.run_state(dir)), nil, "no checkpoint yet")
  run:save(0, { state = { before = { reward_mean = -0.3, answers = { { reward = -0.3 } } } } })
  run:save(0, { state = { before = { reward_mean = -0.25 } } })
  local state, step, name = rook.run_state(dir)
  check.eq(state.before.reward_mean, -0.25, "the newest checkpoint's state")
  check.eq(step, 0)
  check.eq(name, "step-00000000")
  run:close()
  check.eq(rook.run_state(dir).before.reward_mean, -0.25, "after the run closed")
  local none, err = rook.run_state(tmpdir() .. "/missing")
  check.eq(none, nil)
  check.truthy(string.find(err, "does not exist", 1, true), err)
end

return T
