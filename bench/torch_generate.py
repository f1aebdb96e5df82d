#!/usr/bin/env python3
"""PyTorch CPU peer of rookscript's KV-cache generation benchmark (run by cmd/rookbench).

The same nanoGPT-style GPT-2 124M as torch_gpt2.py with a KV cache, at the engine's rollout
shapes, in two cache styles (the ops):

  gen:cat     past_key_values style: each layer's k and v, (B, NH, T, HS), grown by torch.cat
              one step at a time, as Hugging Face's GPT-2 does
  gen:static  preallocated at full length and written in place each step (attention reads a
              strided view of the filled part)

One run is a whole greedy generation under torch.inference_mode():

  prefill  the P unique prompts of L tokens in one forward (LM head on the last position
           only), then every layer's cache repeated G times (P*G sequences), and the first
           new token of every sequence = argmax of its prompt's logits
  decode   N steps, each one forward of P*G new tokens (one per sequence) over the cache,
           next token = argmax of the logits

Output and --serve as torch_gpt2.py; each run also reports prefill_ms and decode_ms.
"""

import argparse
import sys
import time

import torch

sys.dont_write_bytecode = True  # importing torch_gpt2 must not leave bench/__pycache__ behind
from torch_gpt2 import VOCAB, StaticLayer, common_args, env_info, run_ops, setup  # noqa: E402


def generate(model, prompts, group, steps, cache):
    """(prefill ms, decode ms) of one greedy generation with the given cache style."""
    t0 = time.perf_counter()
    logits, past = model(prompts, last_only=True)
    if cache == "static":
        cap = prompts.shape[1] + steps
        static = []
        for k, v in past:
            b, nh, t, hs = k.shape
            kb, vb = k.new_empty(b * group, nh, cap, hs), v.new_empty(b * group, nh, cap, hs)
            kb[:, :, :t] = k.repeat_interleave(group, dim=0)
            vb[:, :, :t] = v.repeat_interleave(group, dim=0)
            static.append(StaticLayer(kb, vb, t))
        past = static
    else:
        past = [(k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)) for k, v in past]
    nxt = logits[:, -1, :].argmax(dim=-1).repeat_interleave(group)  # (P*G,)
    t1 = time.perf_counter()
    for _ in range(steps):
        logits, past = model(nxt[:, None], past=past)
        nxt = logits[:, -1, :].argmax(dim=-1)
    t2 = time.perf_counter()
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_args(ap, ["gen:cat", "gen:static"])
    ap.add_argument("--prompts", type=int, default=8, help="unique prompts P")
    ap.add_argument("--group", type=int, default=8, help="completions per prompt G")
    ap.add_argument("--prompt-len", type=int, default=80, help="prompt tokens L")
    ap.add_argument("--new", type=int, default=64, help="decode steps N")
    args = ap.parse_args()

    model, init_s = setup(args.threads, args.seed)
    model.eval()
    info = env_info(model, args.threads, init_s)
    info.update(prompts=args.prompts, group=args.group, prompt_len=args.prompt_len, new_tokens=args.new)
    g = torch.Generator().manual_seed(args.seed + 2)
    prompts = torch.randint(0, VOCAB, (args.prompts, args.prompt_len), generator=g)

    def op(cache):
        def run():
            with torch.inference_mode():
                p, d = generate(model, prompts, args.group, args.new, cache)
            return {"prefill_ms": p, "decode_ms": d}
        return run

    run_ops({"gen:cat": op("cat"), "gen:static": op("static")}, info, args)


if __name__ == "__main__":
    main()
