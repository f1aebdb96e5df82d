--- evalkit: evaluation helpers. A fixed evaluation set drawn once from a source, the DESIGN
--- metrics before and after training with 95% confidence intervals, and tables comparing them.
---
---   local evalkit = require("evalkit")
---   local set = evalkit.set(rook.positions{ path = "eval.epd", loop = false }, 256)  -- half P:, half A:
---   local before = evalkit.run(policy, set, sf)
---   ... train ...
---   print(evalkit.compare({ before = before, after = evalkit.run(policy, set, sf) }, { "before", "after" }))
---
--- Intervals. Each column's number gets its own interval: a Wilson score interval for the
--- metrics that are a share of answers (each answer scores 0 or 1: it stays inside [0, 1] and
--- does not collapse to a point at 0 or 1 as the normal one does, and a small model sits at
--- 0 or 1 on several of them), a percentile bootstrap for the others (p_top5_legal,
--- p_top5_overlap, reward_mean). The Δ column compares the same prompts before and after, so
--- its interval is a *paired* bootstrap: each resample draws prompts and takes both of their
--- answers, which removes the between-prompt variance that two separate intervals would count
--- twice (a prompt that is hard stays hard). Resampling is stratified by task — the set is a
--- fixed number of P: and A: prompts, so each replicate keeps those counts — and seeded, so a
--- table is the same every time it is printed.
local M = {}

--- The metrics in the order tables print them (DESIGN §4), then the mean reward.
M.METRICS = { "p_format", "p_legal_best", "p_best_acc", "p_top5_legal", "p_top5_overlap",
              "a_format", "a_fen_exact", "a_flags_acc", "a_reward_acc", "reward_mean" }

--- Per-answer field behind each metric, and the task whose answers it averages (nil: all).
local FIELD = { reward_mean = "reward" }
local TASK = { reward_mean = nil }
for _, m in ipairs(M.METRICS) do
  if m ~= "reward_mean" then
    FIELD[m] = m
    TASK[m] = string.sub(m, 1, 2) == "p_" and "policy" or "env"
  end
end

M.Z95 = 1.959963984540054 -- the standard normal's 0.975 quantile
M.RESAMPLES = 2000
M.SEED = 20240607

--- set(data, n [, env_fraction]) → a list of n prompt items taken once, so every evaluation
--- sees the same: round(n·env_fraction) A: prompts (default half) and the rest P:, alternating
--- so that any prefix of the set is balanced too. Each item is a new position of the source.
function M.set(data, n, env_fraction)
  local want_env = math.floor(n * (env_fraction or 0.5) + 0.5)
  local items, env = {}, 0
  for i = 1, n do
    -- Alternate while both tasks still need prompts: A: on even positions.
    local task
    if env >= want_env then task = "policy"
    elseif (i - env - 1) >= n - want_env then task = "env"
    else task = (i % 2 == 0) and "env" or "policy" end
    local it = data:next(1, { task = task })[1]
    if it == nil then break end
    if task == "env" then env = env + 1 end
    items[#items + 1] = it
  end
  assert(#items > 0, "evalkit.set: the source gave no positions")
  return items
end

--- run(model, set, engine [, settings]) → rook.eval's metrics (one greedy answer per prompt
--- by default; settings: rook.eval's, a table or an eval section), with `answers` (one per
--- prompt, in set order) for the intervals.
function M.run(model, set, engine, settings)
  return require("rook").eval(model, set, settings, engine)
end

--- wilson(k, n [, z]) → lo, hi: the Wilson score interval of k successes in n trials
--- (z = 1.96 for 95%). n = 0 gives 0, 1.
function M.wilson(k, n, z)
  z = z or M.Z95
  if n == 0 then return 0, 1 end
  local p, z2 = k / n, z * z
  local d = 1 + z2 / n
  local c = (p + z2 / (2 * n)) / d
  local h = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / d
  return math.max(0, c - h), math.min(1, c + h)
end

--- rng(seed) → function([n]) giving integers in 1..n, or the generator's next state without
--- n: the "minimal standard" generator (x ← 48271·x mod 2³¹−1, C++'s std::minstd_rand),
--- exact in doubles, so intervals do not depend on math.random's state or on the platform.
function M.rng(seed)
  local x = math.floor(seed) % 2147483647
  if x == 0 then x = 1 end
  return function(n)
    x = (x * 48271) % 2147483647
    if n == nil then return x end
    return math.floor((x - 1) / 2147483646 * n) + 1
  end
end

--- quantile(sorted, p): linear interpolation between order statistics (numpy's default).
function M.quantile(s, p)
  local h = (#s - 1) * p + 1
  local i = math.floor(h)
  if i >= #s then return s[#s] end
  return s[i] + (h - i) * (s[i + 1] - s[i])
end

-- The indices of the answers of `task` (nil: all) that carry `field`.
local function indices(answers, task, field)
  local out = {}
  for i, a in ipairs(answers) do
    if (task == nil or a.task == task) and a[field] ~= nil then out[#out + 1] = i end
  end
  return out
end

--- bootstrap(strata [, o]) → lo, hi: the percentile interval of the mean of all values over
--- o.resamples (default 2000) resamples drawn with o.seed at o.level (default 0.95). strata:
--- lists of numbers, each resampled with replacement within itself, so each keeps its size.
function M.bootstrap(strata, o)
  o = o or {}
  local level = o.level or 0.95
  local total, varying, fixed = 0, {}, 0
  for _, v in ipairs(strata) do
    total = total + #v
    -- A stratum of equal values adds the same sum to every resample: no need to draw it.
    local same = true
    for j = 2, #v do if v[j] ~= v[1] then same = false break end end
    if same then fixed = fixed + #v * (v[1] or 0) else varying[#varying + 1] = v end
  end
  assert(total > 0, "evalkit.bootstrap: no values")
  -- M.rng inlined: this loop runs resamples × values times.
  local x = M.rng(o.seed or M.SEED)()
  local floor = math.floor
  local means = {}
  for b = 1, o.resamples or M.RESAMPLES do
    local s = fixed
    for _, v in ipairs(varying) do
      local n = #v
      local scale = n / 2147483646
      for _ = 1, n do
        x = (x * 48271) % 2147483647
        s = s + v[floor((x - 1) * scale) + 1]
      end
    end
    means[b] = s / total
  end
  table.sort(means)
  return M.quantile(means, (1 - level) / 2), M.quantile(means, (1 + level) / 2)
end

-- The values a metric averages, in strata: its task's answers, or for reward_mean the two
-- tasks apart. value(i) gives answer i's number.
local function strata(answers, metric, value)
  local field = FIELD[metric]
  local tasks = TASK[metric] and { TASK[metric] } or { "policy", "env" }
  local out = {}
  for _, task in ipairs(tasks) do
    local vals = {}
    for _, i in ipairs(indices(answers, task, field)) do vals[#vals + 1] = value(i) end
    if #vals > 0 then out[#out + 1] = vals end
  end
  return out
end

--- interval(answers, metric [, o]) → lo, hi of the metric's mean over the answers of its task
--- (nil when it has no answers): Wilson when every answer is 0 or 1, else a bootstrap.
function M.interval(answers, metric, o)
  local field = FIELD[metric]
  local st = strata(answers, metric, function(i) return answers[i][field] end)
  local k, n, binary = 0, 0, true
  for _, vals in ipairs(st) do
    for _, v in ipairs(vals) do
      k, n = k + v, n + 1
      if v ~= 0 and v ~= 1 then binary = false end
    end
  end
  if n == 0 then return nil end
  if binary then return M.wilson(k, n, o and o.z) end
  return M.bootstrap(st, o)
end

--- paired(before, after, metric [, o]) → lo, hi of the change of the metric's mean between
--- two evaluations of the same prompts (answers in the same order): a paired, task-stratified
--- bootstrap of the mean per-prompt difference. nil when the answers do not pair up.
function M.paired(before, after, metric, o)
  if #before ~= #after then return nil end
  local field = FIELD[metric]
  for i, a in ipairs(before) do
    if a.task ~= after[i].task or (a[field] == nil) ~= (after[i][field] == nil) then return nil end
  end
  local st = strata(before, metric, function(i) return after[i][field] - before[i][field] end)
  if #st == 0 then return nil end
  return M.bootstrap(st, o)
end

--- intervals(columns, order [, o]) → { [name] = { [metric] = {lo, hi} }, delta = { [metric] =
--- {lo, hi} } }: each column's intervals (columns with answers only) and the paired interval
--- of last − first.
function M.intervals(columns, order, o)
  local out = { delta = {} }
  for _, name in ipairs(order) do
    local ans = columns[name].answers
    out[name] = {}
    if ans then
      for _, metric in ipairs(M.METRICS) do
        local lo, hi = M.interval(ans, metric, o)
        if lo then out[name][metric] = { lo, hi } end
      end
    end
  end
  local first, last = columns[order[1]].answers, columns[order[#order]].answers
  if #order >= 2 and first and last then
    for _, metric in ipairs(M.METRICS) do
      local lo, hi = M.paired(first, last, metric, o)
      if lo then out.delta[metric] = { lo, hi } end
    end
  end
  return out
end

--- verdict(iv) → { up = {metrics whose change's interval lies above 0}, down = {... below
--- 0} }: the changes beyond noise at 95%, from intervals().
function M.verdict(iv)
  local v = { up = {}, down = {} }
  for _, metric in ipairs(M.METRICS) do
    local d = iv.delta[metric]
    if d and d[1] > 0 then v.up[#v.up + 1] = metric end
    if d and d[2] < 0 then v.down[#v.down + 1] = metric end
  end
  return v
end

local function fmt(v)
  if v == nil then return "-" end
  return string.format("%.3f", v)
end

local function cell(v, iv)
  if iv == nil then return fmt(v) end
  return string.format("%s [%.3f, %.3f]", fmt(v), iv[1], iv[2])
end

local function delta_cell(d, iv)
  if d == nil then return "-" end
  if iv == nil then return string.format("%+.3f", d) end
  local mark = (iv[1] > 0 and " ▲") or (iv[2] < 0 and " ▼") or ""
  return string.format("%+.3f [%+.3f, %+.3f]%s", d, iv[1], iv[2], mark)
end

-- Display width: "Δ", "▲" and "▼" are one column each but several bytes.
local function width(s)
  local _, extra = string.gsub(s, "[\128-\191]", "")
  return #s - extra
end

local function pad(s, w, left)
  local fill = string.rep(" ", math.max(0, w - width(s)))
  return left and (s .. fill) or (fill .. s)
end

--- compare(columns [, order [, o]]) → a text table: one row per metric, one column per named
--- result (columns = { name = metrics, ... }; order lists the names, default sorted), and a
--- Δ column (last − first) when there are two or more. Results from evalkit.run carry their
--- answers, and then each number is followed by its 95% interval and the Δ by its paired one,
--- marked ▲ or ▼ when the interval excludes 0. n: the prompts behind each row. o: the
--- options of intervals(), or o.intervals when they are computed already; o.rows, further
--- rows after the metrics, each { name =, values = { [column] = number }, intervals =
--- { [column] = { lo, hi } } } (a training's own numbers: ablate's no-signal share, say), whose
--- Δ has no interval.
function M.compare(columns, order, o)
  if not order then
    order = {}
    for name in pairs(columns) do order[#order + 1] = name end
    table.sort(order)
  end
  local iv = (o and o.intervals) or M.intervals(columns, order, o)
  local rows = { { "metric" } }
  for _, name in ipairs(order) do rows[1][#rows[1] + 1] = name end
  if #order >= 2 then rows[1][#rows[1] + 1] = "Δ" end
  local any_n = false
  for _, metric in ipairs(M.METRICS) do
    local row = { metric }
    for _, name in ipairs(order) do row[#row + 1] = cell(columns[name][metric], iv[name][metric]) end
    if #order >= 2 then
      local a, b = columns[order[1]][metric], columns[order[#order]][metric]
      row[#row + 1] = delta_cell((a and b) and b - a, iv.delta[metric])
    end
    local ans = columns[order[1]].answers
    if ans then
      row[#row + 1] = tostring(#indices(ans, TASK[metric], FIELD[metric]))
      any_n = true
    end
    rows[#rows + 1] = row
  end
  for _, r in ipairs(o and o.rows or {}) do
    local row = { r.name }
    for _, name in ipairs(order) do row[#row + 1] = cell(r.values[name], r.intervals and r.intervals[name]) end
    if #order >= 2 then
      local a, b = r.values[order[1]], r.values[order[#order]]
      row[#row + 1] = delta_cell((a and b) and b - a, nil)
    end
    rows[#rows + 1] = row
  end
  if any_n then rows[1][#rows[1] + 1] = "n" end
  local widths = {}
  for _, row in ipairs(rows) do
    for j, c in ipairs(row) do widths[j] = math.max(widths[j] or 0, width(c)) end
  end
  local lines = {}
  for _, row in ipairs(rows) do
    local parts = {}
    for j, c in ipairs(row) do parts[j] = pad(c, widths[j] + (j > 1 and 2 or 0), j == 1) end
    lines[#lines + 1] = (string.gsub(table.concat(parts), "%s+$", ""))
  end
  return table.concat(lines, "\n")
end

--- report(before, after) prints the comparison of two evalkit.run results on the same set, as
--- a run ends (the 95% intervals, the paired Δ, what changed beyond noise) and returns
--- {before=, after=, verdict=}.
function M.report(before, after)
  local columns, order = { before = before, after = after }, { "before", "after" }
  local iv = M.intervals(columns, order)
  local verdict = M.verdict(iv)
  print()
  print("evaluation on " .. #before.answers .. " fixed prompts, greedy; [95% interval]; Δ: paired bootstrap, ▲▼ beyond noise")
  print(M.compare(columns, order, { intervals = iv }))
  print(string.format("changed beyond noise: up {%s}, down {%s}", table.concat(verdict.up, ", "), table.concat(verdict.down, ", ")))
  return { before = before, after = after, verdict = verdict }
end

return M
