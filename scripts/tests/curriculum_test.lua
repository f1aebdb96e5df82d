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

return T
