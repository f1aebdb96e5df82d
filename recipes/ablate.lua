-- ablate: run a recipe for every combination of a grid of settings, each as its own run
-- directory, and print the final evaluation metrics side by side.
--
--   rookscript recipes/ablate.lua steps=20 'grid.beta=[0.0, 0.02]' 'grid.lr=[2e-5, 5e-5]'
--   rookscript recipes/ablate.lua pass.model=path/to/model pass.eval_size=32   # passed to every run
--   rookscript plot runs/ablate/*        # the runs' curves, overlaid
local rook = require("rook")
local evalkit = require("evalkit")

local cfg = rook.config{
  recipe = "grpo_stable.lua",   -- resolved from the working directory, then beside this recipe
  base_dir = "runs/ablate",
  steps = 20,
  grid = { beta = { 0.0, 0.02 }, lr = { 1e-4 } },
  pass = {},                    -- overrides given to every run (an open table: any key of the recipe)
}

-- Every combination of the grid's values, as a list of {name=, overrides=}.
local keys = {}
for k in pairs(cfg.grid) do keys[#keys + 1] = k end
table.sort(keys)
local settings = { { name = "", overrides = cfg.pass } }
for _, k in ipairs(keys) do
  local next = {}
  for _, s in ipairs(settings) do
    for _, v in ipairs(cfg.grid[k]) do
      local o = {}
      for kk, vv in pairs(s.overrides) do o[kk] = vv end
      o[k] = v
      local name = (s.name == "" and "" or s.name .. ",") .. k .. "=" .. tostring(v)
      next[#next + 1] = { name = name, overrides = o }
    end
  end
  settings = next
end

local columns, order = {}, {}
for i, s in ipairs(settings) do
  s.overrides.steps = cfg.steps
  s.overrides.run_dir = cfg.base_dir .. "/" .. string.format("%02d", i)
  rook.log("ablation %d/%d: %s → %s", i, #settings, s.name, s.overrides.run_dir)
  local result = rook.exec(cfg.recipe, s.overrides)
  columns[s.name], order[#order + 1] = result.after, s.name
  if i == 1 then columns.before, order = result.before, { "before", s.name } end
end
print()
print(evalkit.compare(columns, order))
return columns
