-- A recipe that catches its failed save and goes on: the run must still not end with exit 0.
local rook = require("rook")
local cfg = rook.config{ run_dir = "runs/swallowed" }
local policy = assert(rook.load("random:tiny"))
local run = assert(rook.run{ dir = cfg.run_dir, policy = policy, opt = rook.adamw(policy) })
run:save(1)
assert(os.rename(cfg.run_dir .. "/checkpoints", cfg.run_dir .. "/checkpoints.moved"))
assert(io.open(cfg.run_dir .. "/checkpoints", "w")):close()
local ok, err = pcall(run.save, run, 2)
print("caught:", ok, err)
