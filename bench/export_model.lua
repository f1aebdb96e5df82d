-- Saves a model as a Hugging Face GPT-2 directory (config.json + model.safetensors): the weights
-- rookbench times, for the torch-CUDA peer (bench/torch_cuda.py) to load.
--
--   rookscript bench/export_model.lua out=DIR [model=random:124m@seed=42]
local rook = require("rook")
local cfg = rook.config({ model = "random:124m@seed=42", out = "" })
if cfg.out == "" then error("out=DIR: the directory to save the model in", 0) end
assert(assert(rook.load(cfg.model)):save(cfg.out))
rook.log("saved %s in %s", cfg.model, cfg.out)
