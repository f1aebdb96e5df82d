-- Runs until it is stopped. With with_run=true it holds a run open (resumed if resume= is
-- given, with a checkpoint so that it can be), so an interrupt waits for a step that does not
-- end; without one there is nothing to save.
local rook = require("rook")
local cfg = rook.config{ run_dir = "runs/busy", with_run = true }
if cfg.with_run then
  local policy = assert(rook.load("random:tiny"))
  local resume = cfg.resume ~= "" and cfg.resume or nil
  local run = assert(rook.run{ dir = cfg.run_dir, resume = resume, policy = policy, opt = rook.adamw(policy) })
  if not run.resumed then run:save(0) end
end
print("ready")
while true do end
