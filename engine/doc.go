// Package engine holds every numeric and domain component of rookscript; it never
// imports Lua. Its sub-packages:
//
//	backend      the small interface of kernels a device implements, with Buf/I32 memory views
//	backend/cpu  the CPU device: Go loops on goroutines plus OpenBLAS SGEMM through cgo
//	backend/cuda the CUDA device (build tag cuda): launch (host side, cuBLAS), kernels (CUDA C
//	             sources and their PTX), emu (the kernels without a GPU), internal PTX tools
//	device       opens a backend by name ("cpu", "cuda")
//	gpt2         the model: parameter layout, packed-batch forward/backward, KV-cache decode,
//	             Hugging Face and llm.c loaders and savers
//	safetensors  the safetensors file format: parse, read, write
//	tokenizer    GPT-2 byte-pair encoding (r50k_base), offline
//	rollout      grouped sampling with logprobs recorded at sampling time (on the device where
//	             the backend samples there)
//	philox       the sampler's generator, Philox4x32-10: the same uniforms on the CPU and the GPU
//	grpo         advantages, clipped loss variants, KL estimators, the update step, metrics
//	optim        AdamW, gradient clipping, learning-rate schedules
//	sft          supervised fine-tuning on documents
//	chess        the rules: positions and FEN (python-chess conventions), legal moves, SAN,
//	             games, game-over rules, PGN
//	stockfish    a pool of Stockfish processes over UCI: fixed-depth MultiPV analyses, restarts,
//	             a cache that survives runs
//	rookworld    the RookWorld tasks: formats, parsers, the environment step, rewards, metrics,
//	             position sources, the task mix, the dataset builder
//	dataset      prompt rows streamed from parquet and JSONL files and Hugging Face-style shards
//	checkpoint   run directories: atomic checkpoints, exact resume, reference identity
//	tbevents     TensorBoard event files: scalars, text, hparams, sessions
//	atomicfile   files replaced atomically (temporary file, fsync, rename)
//	internal     paritytest: a backend checked against the CPU backend, kernel by kernel and
//	             whole-model step by step (run by the CUDA emulator's tests and the GPU's)
package engine
