local check = require("check")
local rook = require("rook")

local T = {}

function T.test_budget_specs()
  local ram = assert(rook.memory.ram())
  check.truthy(ram > 2 ^ 20, "the machine has RAM")
  check.eq(rook.memory.budget(""), math.floor(0.5 * ram), "default: half of RAM")
  check.eq(rook.memory.budget(nil), math.floor(0.5 * ram), "nil: the default")
  check.eq(rook.memory.budget("0.25"), math.floor(0.25 * ram), "a fraction of RAM")
  check.eq(rook.memory.budget(1), ram, "all of it")
  check.eq(rook.memory.budget("8GB"), 8e9)
  check.eq(rook.memory.budget("512 MiB"), 512 * 2 ^ 20)
  check.eq(rook.memory.budget(3e9), 3e9, "a number of bytes")
  check.errors(function() rook.memory.budget("lots") end, 'memory budget "lots"')
  check.errors(function() rook.memory.budget(-1) end, "a fraction must be in (0, 1]")
  check.errors(function() rook.memory.budget({}) end, "want a size or a fraction of RAM")
end

-- rook.sft.plan: as many documents per micro-batch as fit the budget and 4096 tokens, up to
-- the batch (rook.grpo.plan: grpo_test.lua).
function T.test_sft_plan()
  local m = rook.load("random:small")
  local o = { budget = "64GB", seq_len = 200, batch = 64 }
  local p = rook.sft.plan(m, o)
  check.eq(p.micro_batch, 20, "a large budget: micro-batches of 4096 tokens")
  check.truthy(p.bytes <= p.budget, p.text)
  local sum = 0
  for _, v in pairs(p.parts) do sum = sum + v end
  check.eq(p.bytes, sum, "bytes is the sum of the parts")
  check.truthy(string.find(p.text, "micro-batches of 20 of 64 sequences", 1, true), p.text)

  o.budget = p.bytes - 1 -- one byte short of 20 documents
  local q = rook.sft.plan(m, o)
  check.eq(q.micro_batch, 19, "the budget binds")
  check.truthy(q.bytes <= o.budget, "and is kept")

  o.budget = "1MB"
  check.errors(function() rook.sft.plan(m, o) end, "rook.sft.plan: SFT needs")
  check.errors(function() rook.sft.plan(m, o) end, "over its 1.0 MB budget")
  -- A step's documents are held whatever the micro-batch: a huge batch is refused too.
  check.errors(function() rook.sft.plan(m, { batch = 1e9, budget = "8GB" }) end, "lower batch (1000000000)")

  o.budget, o.batch = "64GB", 8
  check.eq(rook.sft.plan(m, o).micro_batch, 8, "never more than a step's documents")
  o.seq_len = 300
  local c = rook.sft.plan(m, o)
  o.seq_len = 256
  check.eq(c.bytes, rook.sft.plan(m, o).bytes, "a bound beyond the context is the context")
  check.eq(rook.sft.plan(m, { batch = 2 }).seq_len, 256, "the context by default")
  check.errors(function() rook.sft.plan(m, { batch = 1, seq_len = 0 }) end, "seq_len must be ≥ 1")
  check.errors(function() rook.sft.plan(m, { seqlen = 30 }) end, 'unknown option "seqlen"')
end

function T.test_peak()
  local p = assert(rook.memory.peak())
  check.truthy(p > 2 ^ 20, "the process holds memory")
end

-- rook.memory.limit sets the runtime's soft memory limit (with GOMEMLIMIT set it leaves it:
-- TestMemoryLimitLeavesGOMEMLIMIT).
function T.test_limit()
  local got, set = rook.memory.limit("800 MiB")
  check.eq(set, true)
  check.eq(got, 800 * 2 ^ 20)
  check.eq(select(1, rook.memory.limit("1 TiB")), 2 ^ 40)
  check.errors(function() rook.memory.limit("lots") end, 'memory budget "lots"')
end

-- Calls no plan sized are refused when they cannot fit the process's memory, with what was
-- asked for, never the runtime's fatal "out of memory".
function T.test_unplanned_calls_that_cannot_fit()
  local m = rook.load("random:tiny")
  check.errors(function() m:generate({ "P: 4k3/8/8/8/8/8/8/4K3 w - - 0 1" }, { n = 1e9, max_new_tokens = 8 }) end,
    "this process may use")
  local src = rook.positions("generator")
  check.errors(function() src:next(1e12) end, "1000000000000 items of about 3.1 kB each are more than the")
  check.eq(#src:next(2), 2, "the source still works")
end

return T
