-- ablate: run a recipe for every combination of a grid of settings — each combination an arm,
-- in its own run directory base_dir/01, /02, … — and print the arms' final evaluations side
-- by side, after the first arm's evaluation before training, and under them each arm's
-- training as its metrics.jsonl records it: the share of trained groups without reward signal,
-- the share of drawn groups that dynamic sampling dropped, rollouts per step and wall time.
--
--   rookscript recipes/ablate.lua steps=20 'grid.beta=[0.0, 0.02]' 'grid.lr=[2e-5, 5e-5]'
--   rookscript recipes/ablate.lua 'grid.rollout.temperature=[0.5, 0.7]' 'grid.kl_warmup=[0, 5]'
--   rookscript recipes/ablate.lua pass.model=path/to/model pass.eval_size=32   # given to every arm
--   rookscript plot runs/ablate/*        # the arms' curves, overlaid
--
-- A grid key is any setting of the recipe: by its name when one section has it (beta), with
-- its section (grpo.beta, stockfish.depth), or a value of the recipe (kl_warmup); a grid on the
-- command line replaces the default one. Each arm runs with steps, then pass, then its grid
-- values (a later one wins). Every arm's settings are checked before any arm trains: a typo in
-- one refuses the whole ablation, naming the arm and the key. An arm that fails, or that its
-- recovery policy stops, is marked FAILED in the table and the others still run; the
-- ablation then exits 1.
--
-- Arms as separate processes (a Slurm array, xargs -P): arm=K runs arm K alone, in the run
-- directory the whole ablation gives it; collect=true then builds the table from the arms' run
-- directories (the eval/ records of their metrics.jsonl), training nothing. Give each the same
-- settings, and base_dir on the command line (a confined collect reads only paths named there):
--
--   seq 4 | xargs -P 4 -I{} rookscript recipes/ablate.lua base_dir=runs/b 'grid.beta=[0, 0.02]' 'grid.lr=[1e-4, 3e-4]' arm={}
--   rookscript recipes/ablate.lua base_dir=runs/b 'grid.beta=[0, 0.02]' 'grid.lr=[1e-4, 3e-4]' collect=true
--
-- An interrupt (Ctrl-C) stops the ablation, printing the command that resumes the arm it
-- stopped: resume that arm, run the ones after it with arm=K, then collect=true.
local rook = require("rook")
local evalkit = require("evalkit")

local cfg = rook.config({
  recipe = "grpo_stable.lua",   -- resolved from the working directory, then beside this recipe
  base_dir = "runs/ablate",
  steps = 20,
  grid = {},                    -- setting = its values (an open table); empty: beta {0, 0.02}, lr {1e-4}
  pass = {},                    -- overrides given to every arm (an open table: any key of the recipe)
  arm = 0,                      -- 0: every arm in turn; K: arm K alone
  collect = false,              -- the table from the arms' run directories, training nothing
}, { arm = "integer >= 0" })

-- A table of settings as dotted keys, { rollout = { temperature = x } } → { ["rollout.temperature"] = x };
-- a list is a value (in the grid, the values).
local function dotted(t, prefix, out)
  out = out or {}
  for k, v in pairs(t) do
    if type(v) == "table" and #v == 0 and next(v) ~= nil then dotted(v, prefix .. k .. ".", out)
    else out[prefix .. k] = v end
  end
  return out
end

local function show(v)
  if type(v) ~= "table" then return tostring(v) end
  local parts = {}
  for i, x in ipairs(v) do parts[i] = show(x) end
  return "[" .. table.concat(parts, ",") .. "]"
end

-- The arms: every combination of the grid's values, in the order of the sorted keys.
local grid = dotted(next(cfg.grid) and cfg.grid or { beta = { 0.0, 0.02 }, lr = { 1e-4 } }, "")
local base = dotted(cfg.pass, "")
base.steps = base.steps or cfg.steps
local keys = {}
for k, values in pairs(grid) do
  if type(values) ~= "table" then grid[k] = { values } end
  assert(#grid[k] > 0, "ablate: grid." .. k .. " has no values")
  keys[#keys + 1] = k
end
for _, k in ipairs({ "run_dir", "resume" }) do
  assert(grid[k] == nil and base[k] == nil, "ablate: " .. k .. " cannot be in grid or pass: arm K runs in base_dir/K (01, 02, …)")
end
table.sort(keys)
local arms = { { name = "", overrides = base } }
for _, k in ipairs(keys) do
  local more = {}
  for _, a in ipairs(arms) do
    for _, v in ipairs(grid[k]) do
      local o = {}
      for kk, vv in pairs(a.overrides) do o[kk] = vv end
      o[k] = v
      more[#more + 1] = { name = (a.name == "" and "" or a.name .. ",") .. k .. "=" .. show(v), overrides = o }
    end
  end
  arms = more
end
for i, a in ipairs(arms) do
  a.dir = string.format("%s/%02d", cfg.base_dir, i)
  a.overrides.run_dir = a.dir
end
assert(cfg.arm <= #arms, string.format("ablate: arm=%d, but the grid has %d arms", cfg.arm, #arms))
local function runs_here(i) return cfg.arm == 0 or cfg.arm == i end

-- Every arm is checked before any trains. Those this process trains are checked with their run
-- directories too; the others without (another process may be running one, or have finished it).
local refused = {}
for i, a in ipairs(arms) do
  local o = a.overrides
  if cfg.collect or not runs_here(i) then
    o = {}
    for k, v in pairs(a.overrides) do o[k] = v end
    o.run_dir = ""
  end
  local ok, err = rook.exec(cfg.recipe, o, { check = true })
  if not ok then refused[#refused + 1] = string.format("  arm %d (%s): %s", i, a.name, err) end
  a.resolved = ok -- the arm's config, for its prompts per step
end
assert(#refused == 0, "ablate: no arm ran; these arms' settings are refused:\n" .. table.concat(refused, "\n"))

local function first_line(s) return (string.match(s, "[^\n]+") or s) end
local function last_line(s)
  local last = s
  for l in string.gmatch(s, "[^\n]+") do if string.find(l, "%S") then last = l end end
  return (string.gsub(last, "^%s+", ""))
end

-- An arm's evaluations as its run directory holds them: those its last checkpoint saved (the
-- recipe's state: before training, and after it at the last step, answers and all), else the
-- numbers of metrics.jsonl's eval/ records — the first before training, one at the arm's last
-- step after it; a report.txt says that the recovery policy stopped the run, whose last record
-- is then where it stopped.
local function from_dir(a)
  local st = rook.run_state(a.dir)
  if st and st.before and st.after and st.after_step == a.overrides.steps then
    return { before = st.before, after = st.after }
  end
  local readable, f = pcall(io.open, a.dir .. "/metrics.jsonl")
  assert(readable, f) -- a confined collect reads base_dir when the command line names it
  if not f then return { failed = "no run in " .. a.dir } end
  local evals = {}
  for line in f:lines() do
    if string.find(line, '"eval/', 1, true) and string.sub(line, -1) == "}" then -- not a torn last line
      local m = { step = tonumber(string.match(line, '^{"step":(%d+)')) }
      for k, v in string.gmatch(line, '"eval/([%w_]+)":([-+%d.eE]+)') do m[k] = tonumber(v) end
      evals[#evals + 1] = m
    end
  end
  f:close()
  local r = io.open(a.dir .. "/report.txt")
  local stopped = r and "stopped: " .. last_line(r:read("*a"))
  if r then r:close() end
  local last = #evals >= 2 and evals[#evals] or nil
  if last and (stopped or last.step == a.overrides.steps) then
    return { before = evals[1], after = last, failed = stopped }
  end
  return { failed = stopped or string.format("no evaluation at step %d in %s/metrics.jsonl (the run failed, or runs still)",
                                              a.overrides.steps, a.dir) }
end

-- An arm run here: what the recipe returns. A failure is the arm's, and the next arm runs.
local function run_arm(i, a)
  rook.log("ablation arm %d/%d: %s → %s", i, #arms, a.name, a.dir)
  local result, note = rook.exec(cfg.recipe, a.overrides, { catch = true })
  if result == nil or result.after == nil then
    note = note or "the recipe returned no {before=, after=} evaluations"
    print(string.format("arm %d (%s) failed: %s", i, a.name, note))
    return { failed = first_line(note) }
  end
  return { before = result.before, after = result.after, failed = note and "stopped: " .. last_line(note) }
end

-- A metrics.jsonl time ("2006-01-02T15:04:05.000Z", UTC) in seconds since 1970 (the days
-- of the proleptic Gregorian calendar, as Hinnant's days_from_civil counts them).
local function seconds(t)
  local y, mo, d, h, mi, s = string.match(t or "", "^(%d+)-(%d+)-(%d+)T(%d+):(%d+):([%d.]+)Z$")
  if not y then return nil end
  y, mo = tonumber(y) - (tonumber(mo) <= 2 and 1 or 0), tonumber(mo)
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * ((mo + 9) % 12) + 2) / 5) + tonumber(d) - 1
  local days = era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
  return days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(s)
end

-- An arm's training as its metrics.jsonl's step records give it (nil without them): no_signal,
-- the share of the groups its steps trained on whose rewards tie (frac_reward_zero_std of
-- dynamic/groups_kept groups, or of the arm's prompts), with its Wilson interval; dropped,
-- the share of the groups drawn that dynamic sampling dropped (0 without it), with its
-- interval; draws, rollouts per step; wall_s, seconds from the evaluation before training to
-- the last step's record.
local function training(a)
  local readable, f = pcall(io.open, a.dir .. "/metrics.jsonl")
  if not (readable and f) then return nil end
  local prompts = a.resolved and a.resolved.prompts
  local t = { steps = 0, tied = 0, trained = 0, dropped = 0, drawn = 0, draws = 0 }
  for line in f:lines() do
    if string.sub(line, -1) == "}" then -- not a torn last line
      local time = seconds(string.match(line, '"time":"([^"]+)"'))
      if string.find(line, '"eval/', 1, true) then
        t.start = t.start or time
      else
        local m = {}
        for k, v in string.gmatch(line, '"([%w_/.]+)":([-+%d.eE]+)') do m[k] = tonumber(v) end
        local groups = m["dynamic/groups_kept"] or prompts
        if m.frac_reward_zero_std and groups then
          t.tied, t.trained = t.tied + math.floor(m.frac_reward_zero_std * groups + 0.5), t.trained + groups
        end
        t.drawn = t.drawn + (m["dynamic/groups_drawn"] or groups or 0)
        t.dropped = t.dropped + (m["dynamic/groups_dropped"] or 0)
        t.draws, t.steps, t.last = t.draws + (m["dynamic/draws"] or 1), t.steps + 1, time
      end
    end
  end
  f:close()
  if t.steps == 0 then return nil end
  local out = { draws = t.draws / t.steps, wall_s = t.start and t.last and t.last - t.start, intervals = {} }
  for name, kn in pairs({ no_signal = { t.tied, t.trained }, dropped = { t.dropped, t.drawn } }) do
    if kn[2] > 0 then
      out[name], out.intervals[name] = kn[1] / kn[2], { evalkit.wilson(kn[1], kn[2]) }
    end
  end
  return out
end

local results = {}
for i, a in ipairs(arms) do
  if runs_here(i) then results[i] = cfg.collect and from_dir(a) or run_arm(i, a) end
end

-- The table: a finished arm's evaluations with their answers (for the 95% intervals); a failed
-- or stopped arm's numbers alone, as metrics.jsonl records them, so that collect prints the same.
local function numbers(m)
  local out = {}
  for _, k in ipairs(evalkit.METRICS) do out[k] = m and m[k] end
  return out
end
local columns, order, failed, ran = {}, {}, {}, 0
local rows = { { name = "no_signal" }, { name = "dropped" }, { name = "draws" }, { name = "wall_s" } }
for _, row in ipairs(rows) do row.values, row.intervals = {}, {} end
for i, a in ipairs(arms) do
  local r = results[i]
  if r then
    if r.after and not columns.before then columns.before = r.failed and numbers(r.before) or r.before end
    local name = r.failed and a.name .. " FAILED" or a.name
    columns[name], order[#order + 1], ran = r.failed and numbers(r.after) or r.after, name, ran + 1
    if r.failed then failed[#failed + 1] = string.format("  arm %d (%s, %s): %s", i, a.name, a.dir, r.failed) end
    local t = training(a) or { intervals = {} }
    for _, row in ipairs(rows) do row.values[name], row.intervals[name] = t[row.name], t.intervals[row.name] end
  end
end
if columns.before then table.insert(order, 1, "before") end
print()
print("final evaluation of each arm (before: the first finished arm's, before training); [95% interval]; Δ: last column − first")
print("training: no_signal, share of trained groups whose rewards tie; dropped, share of drawn groups dynamic sampling dropped;")
print("draws, rollouts per step; wall_s, seconds from the evaluation before training to the last step")
print(evalkit.compare(columns, order, { rows = rows }))
if #failed > 0 then print("FAILED:\n" .. table.concat(failed, "\n")) end
assert(#failed == 0, string.format("ablate: %d of %d arm(s) FAILED (listed under the table)", #failed, ran))
return columns
