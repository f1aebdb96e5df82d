// Package checkpoint keeps a training run on disk: atomic checkpoints that resume exactly,
// the identity of the KL reference model, and the metrics log.
//
// A run directory:
//
//	lock                         the writer's flock (Create, Open); its content is the holder's pid
//	recipe.lua                   copy of the recipe source (WriteRecipe)
//	config.json                  the resolved config (WriteConfig)
//	metrics.jsonl                one {"step": N, "time": RFC3339, ...metrics} object per line
//	metrics-discarded.jsonl      records a resume or rollback took out of metrics.jsonl (RewindMetrics)
//	samples.jsonl                a few completions of each step (AppendSamples); samples-discarded.jsonl as for metrics
//	checkpoints/LATEST           name of the newest complete checkpoint, replaced atomically
//	checkpoints/BEST             name of the best checkpoint by the run's metric (if one is set)
//	checkpoints/step-00000050/   one checkpoint:
//	  model/                     the policy as a Hugging Face GPT-2 dir (config.json, model.safetensors)
//	  optimizer.safetensors      AdamW "m" and "v" (flat, parameter Layout order) and "steps"
//	  reference/                 the KL reference as an HF dir, only after an explicit sync
//	  state.json                 step, RNG states, data cursor, recipe state, resolved config,
//	                             the engine settings the calls used (the caller's record),
//	                             reference identity {source, hash, syncs}, optimizer config (and
//	                             the one it was built with), the kernels that computed it,
//	                             metrics, the size of metrics.jsonl
//	                             when saved, retention, and the size and sha256 of every other file
//
// A save is built in checkpoints/.tmp-step-N-*, every file and directory fsynced, renamed to
// step-N, then LATEST is replaced and old checkpoints pruned (keep-last-N, never the LATEST or
// BEST one), so a crash at any point leaves the previous checkpoint loadable. Loading checks
// state.json's own checksum and every file's size and sha256 before reading anything.
//
// One process writes a run directory at a time: Create and Open take an exclusive flock on its
// lock file (a second writer gets a LockedError naming the holder's pid), which the kernel
// releases when the process ends, however it ends. OpenReadOnly reads a run without it.
//
// metrics.jsonl holds one record per step of the history that led to the run's weights: a
// checkpoint records how long the log was when it was saved, and a resume or a rollback to it
// moves what was logged later (the steps the run then repeats) to metrics-discarded.jsonl.
//
// The reference model is identified by its source (a model path or random spec) and content
// hash (gpt2.ParamsHash). On resume it is reloaded from that source and the hash checked; it
// changes only through Identity.Sync, whose weights the next checkpoint stores.
package checkpoint
