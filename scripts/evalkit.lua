--- evalkit: evaluation helpers. A fixed evaluation set drawn once from a source, the DESIGN
--- metrics before and after training, and tables comparing them.
---
---   local evalkit = require("evalkit")
---   local set = evalkit.set(rook.positions{ path = "eval.epd", task = "mix", loop = false }, 64)
---   local before = evalkit.run(policy, set, sf)
---   ... train ...
---   print(evalkit.compare({ before = before, after = evalkit.run(policy, set, sf) }))
local M = {}

--- The metrics in the order tables print them (DESIGN §4), then the mean reward.
M.METRICS = { "p_format", "p_legal_best", "p_best_acc", "p_top5_legal", "p_top5_overlap",
              "a_format", "a_fen_exact", "a_flags_acc", "a_reward_acc", "reward_mean" }

--- set(data, n) → a list of n prompt items taken once, so every evaluation sees the same.
function M.set(data, n)
  local items = data:next(n)
  assert(#items > 0, "evalkit.set: the source gave no positions")
  return items
end

--- run(model, set, engine [, opts]) → rook.eval's metrics (greedy decoding by default).
function M.run(model, set, engine, opts)
  local o = { engine = engine, greedy = true, max_new_tokens = 144 }
  for k, v in pairs(opts or {}) do o[k] = v end
  return require("rook").eval(model, set, o)
end

local function fmt(v)
  if v == nil then return "-" end
  return string.format("%.3f", v)
end

--- compare(columns [, order]) → a text table: one row per metric, one column per named
--- result (columns = { name = metrics, ... }; order lists the names, default sorted), and a
--- Δ column (last − first) when there are two or more.
function M.compare(columns, order)
  if not order then
    order = {}
    for name in pairs(columns) do order[#order + 1] = name end
    table.sort(order)
  end
  local width = 16
  for _, name in ipairs(order) do width = math.max(width, #name + 2) end
  local head = string.format("%-16s", "metric")
  for _, name in ipairs(order) do head = head .. string.format("%" .. width .. "s", name) end
  if #order >= 2 then head = head .. string.format("%10s", "Δ") end
  local lines = { head }
  for _, metric in ipairs(M.METRICS) do
    local row = string.format("%-16s", metric)
    for _, name in ipairs(order) do row = row .. string.format("%" .. width .. "s", fmt(columns[name][metric])) end
    if #order >= 2 then
      local a, b = columns[order[1]][metric], columns[order[#order]][metric]
      row = row .. string.format("%10s", (a and b) and string.format("%+.3f", b - a) or "-")
    end
    lines[#lines + 1] = row
  end
  return table.concat(lines, "\n")
end

return M
