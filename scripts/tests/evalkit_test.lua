local check = require("check")
local evalkit = require("evalkit")

local T = {}

function T.test_compare_table()
  local before = { p_format = 0.1, a_fen_exact = 0.2, reward_mean = -0.1 }
  local after = { p_format = 0.6, a_fen_exact = 0.25, reward_mean = 0.3 }
  local s = evalkit.compare({ before = before, after = after }, { "before", "after" })
  check.truthy(string.find(s, "p_format%s+0.100%s+0.600%s+%+0.500"), "p_format row:\n" .. s)
  check.truthy(string.find(s, "reward_mean%s+%-0.100%s+0.300%s+%+0.400"), "reward row")
  check.truthy(string.find(s, "p_best_acc%s+%-%s+%-%s+%-"), "missing metrics print as -")
end

-- o.rows: further rows after the metrics, with their intervals where given; their Δ has none.
function T.test_compare_extra_rows()
  local x = { reward_mean = 0.1 }
  local y = { reward_mean = 0.2 }
  local rows = { { name = "no_signal", values = { x = 0.25, y = 0 }, intervals = { x = { 0.1, 0.5 } } },
                 { name = "wall_s", values = { y = 12.5 } } }
  local s = evalkit.compare({ x = x, y = y }, { "x", "y" }, { rows = rows })
  check.truthy(string.find(s, "no_signal%s+0.250 %[0.100, 0.500%]%s+0.000%s+%-0.250\n"), "no_signal row:\n" .. s)
  check.truthy(string.find(s, "wall_s%s+%-%s+12.500%s+%-$"), "a row with a missing value:\n" .. s)
  check.truthy(string.find(s, "reward_mean.*no_signal"), "after the metrics")
end

-- Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I,
-- method 3 (Wilson score, no continuity correction), to the 4 decimals printed there.
function T.test_wilson_against_published_values()
  local cases = {
    { 81, 263, 0.2553, 0.3662 },
    { 15, 148, 0.0624, 0.1605 },
    { 0, 20, 0.0000, 0.1611 },
    { 1, 29, 0.0061, 0.1718 },
  }
  for _, c in ipairs(cases) do
    local lo, hi = evalkit.wilson(c[1], c[2])
    check.near(lo, c[3], 5e-5, string.format("%d/%d lower", c[1], c[2]))
    check.near(hi, c[4], 5e-5, string.format("%d/%d upper", c[1], c[2]))
  end
  local lo, hi = evalkit.wilson(128, 128)
  check.eq(hi, 1, "all successes: the upper end is 1")
  check.near(lo, 0.9709, 5e-5, "and the lower end is not")
end

function T.test_rng_is_minstd()
  local r = evalkit.rng(1)
  local x
  for _ = 1, 10000 do x = r() end
  check.eq(x, 399268537, "the 10000th value of std::minstd_rand seeded 1 (C++ [rand.predef])")
  local d = evalkit.rng(7)
  for _ = 1, 1000 do
    local i = d(5)
    check.truthy(i >= 1 and i <= 5 and i == math.floor(i), "index in 1..5: " .. i)
  end
end

function T.test_quantile_interpolates()
  check.eq(evalkit.quantile({ 1, 2, 3, 4 }, 0.5), 2.5)
  check.near(evalkit.quantile({ 1, 2, 3, 4, 5 }, 0.025), 1.1, 1e-12)
  check.eq(evalkit.quantile({ 1, 2, 3, 4, 5 }, 1), 5)
end

function T.test_bootstrap_matches_the_normal_interval_for_a_large_sample()
  -- 400 values with mean 0.5 and standard deviation ≈ 0.2887 (a uniform grid on [0, 1]):
  -- the mean's 95% interval is ±1.96·0.2887/√400 ≈ ±0.0283.
  local v = {}
  for i = 1, 400 do v[i] = (i - 0.5) / 400 end
  local lo, hi = evalkit.bootstrap({ v })
  check.near(lo, 0.5 - 0.0283, 0.003, "lower")
  check.near(hi, 0.5 + 0.0283, 0.003, "upper")
  local lo2, hi2 = evalkit.bootstrap({ v })
  check.eq(lo2, lo, "seeded: the same interval every time")
  check.eq(hi2, hi)
  local lo3 = evalkit.bootstrap({ v }, { seed = 99, resamples = 200 })
  check.truthy(lo3 ~= lo, "another seed, other resamples")
end

function T.test_bootstrap_keeps_each_stratum_size()
  -- Three zeros and one one, as two strata: every resample's mean is exactly 1/4. Pooled into
  -- one list, resamples would see 0 to 4 ones.
  local lo, hi = evalkit.bootstrap({ { 0, 0, 0 }, { 1 } })
  check.eq(lo, 0.25)
  check.eq(hi, 0.25)
  local plo, phi = evalkit.bootstrap({ { 0, 0, 0, 1 } })
  check.truthy(plo < 0.25 and phi > 0.25, "pooled varies")
end

-- answers(task, field, values) → per-prompt answers as rook.eval returns them.
local function answers(list)
  local out = {}
  for i, a in ipairs(list) do
    local t = { task = a[1], reward = a[3] }
    t[a[1] == "policy" and "p_format" or "a_format"] = a[2]
    t[a[1] == "policy" and "p_top5_overlap" or "a_fen_exact"] = a[2]
    out[i] = t
  end
  return out
end

function T.test_paired_interval_removes_prompt_difficulty()
  -- Rewards that differ a lot between prompts, each raised by exactly 0.1: the paired interval
  -- of the change is that 0.1 exactly, where each side's own interval is wide.
  local b, a = {}, {}
  for i = 1, 40 do
    local task = i % 2 == 0 and "env" or "policy"
    local r = ((i * 37) % 11) / 10 - 0.5
    b[i] = { task, 0, r }
    a[i] = { task, 0, r + 0.1 }
  end
  local before, after = answers(b), answers(a)
  local lo, hi = evalkit.paired(before, after, "reward_mean")
  check.near(lo, 0.1, 1e-12)
  check.near(hi, 0.1, 1e-12)
  local blo, bhi = evalkit.interval(before, "reward_mean")
  check.truthy(bhi - blo > 0.15, "unpaired width " .. (bhi - blo))
  check.eq(evalkit.paired(before, { after[1] }, "reward_mean"), nil, "different sets do not pair")
end

function T.test_interval_kinds_and_tasks()
  local list = {}
  for i = 1, 20 do list[i] = { i <= 10 and "policy" or "env", i <= 4 and 1 or 0, 0 } end
  list[1][2] = 0.5 -- one non-binary p_top5_overlap (and p_format: same field here)
  local ans = answers(list)
  -- a_format: 0 of 10 env answers are 1 → Wilson on n = 10, not 20.
  local lo, hi = evalkit.interval(ans, "a_format")
  local wlo, whi = evalkit.wilson(0, 10)
  check.eq(lo, wlo)
  check.eq(hi, whi)
  -- p_format has a 0.5: bootstrap, within the range of the values.
  local plo, phi = evalkit.interval(ans, "p_format")
  check.truthy(plo >= 0 and phi <= 1 and plo < 0.35 and phi > 0.35, plo .. " " .. phi)
  check.eq(evalkit.interval(ans, "p_best_acc"), nil, "no answer carries it")
end

function T.test_set_is_half_policy_half_env_and_alternates()
  local drawn = 0
  local data = { next = function(_, n, o)
    drawn = drawn + 1
    return { { task = o.task == "env" and "A" or "P", prompt = tostring(drawn) } }
  end }
  local set = evalkit.set(data, 8)
  local tasks = ""
  for _, it in ipairs(set) do tasks = tasks .. it.task end
  check.eq(tasks, "PAPAPAPA")
  check.eq(drawn, 8, "a new position for every prompt")
  local skew = evalkit.set(data, 5, 0.2)
  tasks = ""
  for _, it in ipairs(skew) do tasks = tasks .. it.task end
  check.eq(tasks, "PAPPP", "round(5·0.2) = 1 env prompt")
  local rook = require("rook")
  local real = evalkit.set(rook.positions{ path = "../engine/chess/testdata/positions.epd" }, 6)
  local env = 0
  for _, it in ipairs(real) do
    if it.task == "A" then env = env + 1; check.eq(string.sub(it.prompt, 1, 3), "A: ") end
  end
  check.eq(env, 3)
end

function T.test_compare_prints_intervals_and_marks()
  local b, a = {}, {}
  for i = 1, 64 do
    local task = i % 2 == 0 and "env" or "policy"
    b[i] = { task, 0, -0.3 }
    a[i] = { task, (i % 4 ~= 0) and 1 or 0, 0.5 }
  end
  local before = { answers = answers(b), p_format = 0, a_format = 0, reward_mean = -0.3, p_top5_overlap = 0 }
  local after = { answers = answers(a), p_format = 1, a_format = 0.5, reward_mean = 0.5, p_top5_overlap = 1 }
  local iv = evalkit.intervals({ before = before, after = after }, { "before", "after" })
  local s = evalkit.compare({ before = before, after = after }, { "before", "after" }, { intervals = iv })
  check.eq(select("#", evalkit.compare({ before = before }, { "before" })), 1, "one result: print(compare(...)) prints the table alone")
  local lo, hi = evalkit.wilson(0, 32)
  check.truthy(string.find(s, string.format("p_format%%s+0.000 %%[%.3f, %.3f%%]", lo, hi)), "before's Wilson interval:\n" .. s)
  check.truthy(string.find(s, "reward_mean%s+%-0.300 %[%-0.300, %-0.300%]%s+0.500 %[0.500, 0.500%]%s+%+0.800 %[%+0.800, %+0.800%] ▲%s+64"), "reward row:\n" .. s)
  check.truthy(string.find(s, "a_format%s+0.000 %[[%d.]+, [%d.]+%]%s+0.500 %[[%d.]+, [%d.]+%]%s+%+0.500 %[%+0.[%d]+, %+0.[%d]+%] ▲%s+32"), "a_format row:\n" .. s)
  check.truthy(string.find(s, "p_best_acc%s+%-%s+%-%s+%-"), "metrics without answers print as -")
  local v = evalkit.verdict(iv)
  check.eq(table.concat(v.up, ","), "p_format,p_top5_overlap,a_format,a_fen_exact,reward_mean")
  check.eq(#v.down, 0)
  local back = evalkit.verdict(evalkit.intervals({ a = after, b = before }, { "a", "b" }))
  check.eq(#back.up, 0)
  check.eq(back.down[1], "p_format")
end

return T
