#!/usr/bin/env python3
"""The torch-CUDA peer of rookscript's GPU figures (run by bench/gpu_check.sh).

Hugging Face transformers' GPT-2 (GPT2LMHeadModel) on the weights rookbench times, exported by
rookscript as a Hugging Face directory (bench/export_model.lua), at rookbench's shapes:

  decode   generate() with a static KV cache, greedy, from 80-token prompts: 8 prompts x 8
           samples (64 rows) and 1 prompt x 8 (8 rows); a decode step is the time of a
           64-token generation less that of a 1-token one, over 63 steps (the prefill and the
           first token cancel). In FP32 and in bf16 weights.
  train    one step of GPT-2 124M at B=16, T=128: forward with labels, backward, fused AdamW
           (lr 1e-4, betas 0.9/0.95, no weight decay, as the engine's default), in FP32 (no
           TF32), TF32 matmuls, and bf16 autocast over FP32 weights.

With --compile each also runs under torch.compile (decode: the model's forward, mode
"reduce-overhead", the static cache's documented recipe; train: the model), as long as the
--budget-s allows; a mode that fails is reported with its error, never dropped silently.
Timings are medians of --runs after --warmup, each bracketed by torch.cuda.synchronize().

With --ours (rookbench's result file of the same device) the script also writes --out, the
GPU figures in one object (device, commit, date, rows: name -> number), ours beside the peer's,
and prints the ratios; without it, the peer's rows alone. Progress goes to stderr.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
import traceback

import torch

PROMPT, NEW = 80, 64  # rookbench's generation shapes: 80-token prompts, 64 decode steps


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def timed(fn, runs, warmup):
    """Median wall ms of fn over runs calls after warmup calls, the device drained around each."""
    for _ in range(warmup):
        fn()
    ms = []
    for _ in range(runs):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ms)


def load(path, dtype):
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(path).to("cuda", dtype)
    model.generation_config.eos_token_id = None  # random weights: never stop early
    model.generation_config.pad_token_id = 0
    return model


# The KV cache generate() used: "static" unless this transformers' GPT-2 refused it, then the
# default (dynamic) cache, named with the refusal in the JSON.
CACHE = {"used": "static"}


def decode_ms(path, dtype, prompts, group, compiled, args):
    """One decode step's ms: 64-token minus 1-token generations over 63 steps."""
    if compiled and CACHE["used"] != "static":  # a growing cache would recompile at every step
        raise RuntimeError("no static cache, so no compiled decode")
    try:
        return decode_cache_ms(path, dtype, prompts, group, compiled, args, CACHE["used"] == "static")
    except (ValueError, NotImplementedError) as e:  # a model without a static cache says so this way
        if CACHE["used"] != "static" or "static" not in str(e).lower():
            raise
        CACHE["used"] = f"dynamic (static refused: {str(e).splitlines()[0][:200]})"
        log(f"  the static cache is refused, the default one timed instead: {e}")
        return decode_cache_ms(path, dtype, prompts, group, compiled, args, False)


def decode_cache_ms(path, dtype, prompts, group, compiled, args, static):
    model = load(path, dtype).eval()
    model.generation_config.cache_implementation = "static" if static else None
    model.generation_config.disable_compile = True  # compiled only where this script says so
    if compiled:
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    ids = prompts.repeat_interleave(group, dim=0)
    mask = torch.ones_like(ids)

    def gen(n):
        with torch.inference_mode():
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, do_sample=False)
        assert out.shape == (ids.shape[0], PROMPT + n), out.shape

    full = timed(lambda: gen(NEW), args.runs, args.warmup)
    first = timed(lambda: gen(1), args.runs, args.warmup)
    return (full - first) / (NEW - 1)


def train_ms(path, mode, compiled, args):
    """One train step's ms at B=16, T=128 in mode fp32, tf32 or bf16 (autocast)."""
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = mode == "tf32"
    model = load(path, torch.float32).train()
    step_model = torch.compile(model) if compiled else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0, fused=True)
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randint(0, model.config.vocab_size, (16, 128), generator=g).cuda()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "bf16"):
            loss = step_model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    try:
        return timed(step, args.runs, args.warmup)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False


def peer(args):
    """The peer's rows (name -> ms) and each failed mode's error."""
    g = torch.Generator().manual_seed(args.seed)
    vocab = json.load(open(f"{args.model}/config.json"))["vocab_size"]
    prompts8 = torch.randint(0, vocab, (8, PROMPT), generator=g).cuda()

    def decode(name, dt, prompts, compiled):
        return (name, lambda: decode_ms(args.model, dt, prompts, 8, compiled, args))

    def train(name, mode, compiled):
        return (name, lambda: train_ms(args.model, mode, compiled, args))

    # Every eager mode first, then the compiled ones, the acceptance's rows before the rest: the
    # budget cuts from the end.
    f32, bf16 = torch.float32, torch.bfloat16
    cases = [decode("torch_fp32_decode64_ms", f32, prompts8, False), decode("torch_bf16_decode64_ms", bf16, prompts8, False),
             decode("torch_fp32_decode8_ms", f32, prompts8[:1], False), decode("torch_bf16_decode8_ms", bf16, prompts8[:1], False),
             train("torch_fp32_train_step_ms", "fp32", False), train("torch_tf32_train_step_ms", "tf32", False),
             train("torch_bf16_train_step_ms", "bf16", False)]
    if args.compile:
        cases += [decode("torch_compiled_fp32_decode64_ms", f32, prompts8, True),
                  decode("torch_compiled_bf16_decode64_ms", bf16, prompts8, True),
                  train("torch_compiled_tf32_train_step_ms", "tf32", True), train("torch_compiled_bf16_train_step_ms", "bf16", True),
                  train("torch_compiled_fp32_train_step_ms", "fp32", True),
                  decode("torch_compiled_fp32_decode8_ms", f32, prompts8[:1], True)]
    rows, errors, start = {}, {}, time.monotonic()
    for name, fn in cases:
        if time.monotonic() - start > args.budget_s:
            errors[name] = f"skipped: past the {args.budget_s:.0f} s budget"
            continue
        t = time.monotonic()
        try:
            rows[name] = round(fn(), 4)
            log(f"  {name}: {rows[name]:.3f} ms ({time.monotonic() - t:.0f} s)")
        except Exception as e:  # a mode this torch or transformers cannot run is a finding, not a crash
            errors[name] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
            log(f"  {name}: FAILED {errors[name]}")
            traceback.print_exc(file=sys.stderr)
        torch.cuda.empty_cache()
    return rows, errors


# The names of rookbench's rows (its result file's keys) in the GPU figures, and their scale.
OURS = {"forward_ms": ("engine.forward", 1), "train_step_ms": ("engine.train_step", 1),
        "decode64_ms": ("engine.gen_decode_step", 1), "decode8_ms": ("engine.gen_decode_step_8", 1),
        "grpo_step_s": ("engine.grpo_total_s", 1), "grpo_rollout_s": ("engine.grpo_rollout_s", 1),
        "gemm_own_tflops": ("gemm.matmul_model", 1e-3), "gemm_cublas_tflops": ("gemm.cublas_model", 1e-3)}

# Ratios printed with the figures, a / b: ours over the peer's times (< 1: ours faster), and our
# product kernel's rate over cuBLAS's (the GPU-products issue asks >= 0.8).
RATIOS = [("decode64_ms", "torch_fp32_decode64_ms"), ("decode64_ms", "torch_bf16_decode64_ms"),
          ("decode8_ms", "torch_fp32_decode8_ms"), ("decode8_ms", "torch_bf16_decode8_ms"),
          ("train_step_ms", "torch_fp32_train_step_ms"), ("train_step_ms", "torch_tf32_train_step_ms"),
          ("train_step_ms", "torch_bf16_train_step_ms"), ("gemm_own_tflops", "gemm_cublas_tflops")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a Hugging Face GPT-2 directory (bench/export_model.lua)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--compile", action="store_true", help="also time each mode under torch.compile")
    ap.add_argument("--budget-s", type=float, default=150, help="start no mode after this many seconds")
    ap.add_argument("--ours", help="rookbench's result file of this device, to set beside the peer")
    ap.add_argument("--out", default="bench/results/gpu.json")
    ap.add_argument("--row", action="append", default=[], metavar="NAME=VALUE",
                    help="another figure of ours for the rows (the GPU check's decode-step counts)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_cuda.py: torch sees no CUDA device")
    import transformers

    log(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name()}")
    rows, errors = peer(args)
    result = {"device": torch.cuda.get_device_name(), "commit": "", "date": time.strftime("%Y-%m-%d"),
              "peer": {"torch": torch.__version__, "transformers": transformers.__version__,
                       "cuda": torch.version.cuda, "decode_cache": CACHE["used"], "errors": errors}, "rows": {}}
    if args.ours:
        ours = json.load(open(args.ours))
        by_key = {r["key"]: r["median"] for r in ours["rows"] if "key" in r and "median" in r}
        result.update(commit=ours.get("commit", ""), date=ours.get("date", result["date"]),
                      ours={"file": args.ours, "command": ours.get("command", "")})
        for name, (key, scale) in OURS.items():
            if key in by_key:
                result["rows"][name] = round(by_key[key] * scale, 6)
    else:
        result["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                          text=True).stdout.strip()
    for r in args.row:
        name, _, value = r.partition("=")
        result["rows"][name] = float(value)
    result["rows"].update(rows)
    for a, b in RATIOS:
        if a in result["rows"] and b in result["rows"]:
            print(f"{a} / {b}: {result['rows'][a] / result['rows'][b]:.3f}")
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {args.out}: {len(result['rows'])} rows, {len(errors)} modes failed or skipped")


if __name__ == "__main__":
    main()
