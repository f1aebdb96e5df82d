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

return T
