local check = require("check")
local rook = require("rook")

local T = {}

local EPD = "../engine/chess/testdata/positions.epd"

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  return p
end

-- One training run of `steps` steps (resuming from `resume` if given), saving at `save_at`.
-- Returns the policy's hash and the metrics of each step.
local function train(dir, steps, save_at, resume)
  local policy = rook.load("random:tiny")
  local ref = policy:reference()
  local opt = rook.adamw(policy, { lr = 3e-3 })
  local data = rook.positions{ path = EPD, task = "mix", seed = 5 }
  local run, err = rook.run{ dir = dir, resume = resume, policy = policy, ref = ref, opt = opt, data = data, steps = steps }
  assert(run, err)
  local state = run:state()
  local seen = state.seen or 0
  local kl = {}
  for step = run.step + 1, steps do
    local b = policy:rollout(data:next(2), { group = 4, max_new_tokens = 6, seed = 100 + step, temperature = 1 })
    rook.reward.fn(b, function(_, text) return #text % 5 end)
    local m = rook.grpo.step(policy, ref, opt, b, { beta = 0.05 })
    run:log(step, m)
    seen = seen + b.size
    kl[step] = m.kl
    if step == save_at then run:save(step, { state = { seen = seen } }) end
  end
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

function T.test_rollback_and_sync()
  local dir = tmpdir()
  local policy = rook.load("random:tiny")
  local ref = policy:reference()
  local opt = rook.adamw(policy, { lr = 1e-2 })
  local run, err = rook.run{ dir = dir, policy = policy, ref = ref, opt = opt }
  assert(run, err)
  local _, err = run:rollback()
  check.truthy(string.find(err, "no checkpoint", 1, true), "rollback needs a checkpoint")
  run:save(1)
  local saved = policy:hash()
  local b = policy:rollout({ "a" }, { group = 4, max_new_tokens = 4, seed = 1 })
  b:set_rewards({ 1, 0, 0, 1 })
  rook.grpo.step(policy, ref, opt, b)
  check.truthy(policy:hash() ~= saved, "trained")
  check.eq(run:rollback(), 1)
  check.eq(policy:hash(), saved, "rolled back")
  local h = run:sync_reference(1)
  check.eq(h, policy:hash())
  check.eq(ref:hash(), policy:hash(), "reference synced")
  run:save(2)
  local _, rerr = rook.run{ dir = dir, policy = policy, ref = ref, opt = opt }
  check.truthy(string.find(rerr, "already", 1, true) or string.find(rerr, "exist", 1, true), "a run directory is not reused: " .. tostring(rerr))
  check.errors(function() rook.run{ dir = dir, policy = policy, opt = rook.adamw(rook.load("random:tiny")) } end, "not the policy's optimizer")
end

return T
