#!/usr/bin/env python3
"""PyTorch CPU peer of rookscript's GPT-2 benchmarks (run by cmd/rookbench).

A nanoGPT-style GPT-2 (tanh GELU, LayerNorm eps 1e-5, tied LM head, no dropout, float32) with
random weights, timed at the engine's shapes:

  forward     B x T tokens under torch.no_grad(): logits on every position (the LM head on all
              B*T rows) and the mean cross-entropy against random targets
  train step  the same forward with autograd, zero_grad, backward, AdamW.step() (for-loop
              AdamW, foreach=False, weight decay 0, as the engine's optim.DefaultAdamW)

Each op's warm-up runs come first and are not reported. Stdout is one JSON object: the process
info and, per op, one entry per timed run (wall ms, CPU ms of all threads, system ms, loss);
progress goes to stderr. With --serve the script answers op names read from stdin with one JSON
line each instead (cmd/rookbench runs it that way, alternating its runs with the engine's). The
thread count is torch.set_num_threads(N); the environment (OMP_WAIT_POLICY in particular) is
the caller's, and is echoed in the JSON.

Use Debian's interpreter, which has python3-torch:  /usr/bin/python3 bench/torch_gpt2.py -h
"""

import argparse
import ctypes
import json
import math
import os
import re
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# GPT-2 124M (RookWorld-LM), as gpt2.RookWorld124M.
VOCAB, MAX_T, LAYERS, HEADS, CHANNELS = 50257, 1024, 12, 12, 768


class StaticLayer:
    """One layer's preallocated cache, (B, NH, capacity, HS) for k and v, filled up to n."""

    def __init__(self, k, v, n):
        self.k, self.v, self.n = k, v, n

    def append(self, k, v):
        """Writes the new positions in place; returns views of the filled part."""
        t = k.shape[2]
        self.k[:, :, self.n:self.n + t] = k
        self.v[:, :, self.n:self.n + t] = v
        self.n += t
        return self.k[:, :, :self.n], self.v[:, :, :self.n]


class Attention(nn.Module):
    def __init__(self, c, nh, max_t):
        super().__init__()
        self.nh = nh
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.register_buffer("causal", torch.ones(max_t, max_t, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x, past=None):
        """x (B, T, C). past, when given, is this layer's cache: a tuple (k, v), each
        (B, NH, Tp, HS), that the new positions are concatenated to (past_key_values style),
        or a StaticLayer they are written into. Returns the output and the cache including the
        new positions: the (k, v) tuple, or the same StaticLayer."""
        b, t, c = x.shape
        hs = c // self.nh
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.nh, hs).transpose(1, 2) for z in (q, k, v))  # (B, NH, T, HS)
        if isinstance(past, StaticLayer):
            k, v = past.append(k, v)
        elif past is not None:
            k = torch.cat((past[0], k), dim=2)
            v = torch.cat((past[1], v), dim=2)
        tk = k.shape[2]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        if t > 1:  # query i sits at absolute position tk - t + i and sees keys 0 .. that position
            att = att.masked_fill(~self.causal[tk - t:tk, :tk], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y), past if isinstance(past, StaticLayer) else (k, v)


class Block(nn.Module):
    def __init__(self, c, nh, max_t):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c, eps=1e-5)
        self.attn = Attention(c, nh, max_t)
        self.ln_2 = nn.LayerNorm(c, eps=1e-5)
        self.c_fc = nn.Linear(c, 4 * c)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * c, c)

    def forward(self, x, past=None):
        a, kv = self.attn(self.ln_1(x), past)
        x = x + a
        x = x + self.c_proj(self.gelu(self.c_fc(self.ln_2(x))))
        return x, kv


class GPT(nn.Module):
    def __init__(self, vocab=VOCAB, max_t=MAX_T, layers=LAYERS, heads=HEADS, c=CHANNELS):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(max_t, c)
        self.h = nn.ModuleList(Block(c, heads, max_t) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c, eps=1e-5)
        self.lm_head = nn.Linear(c, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for name, p in self.named_parameters():  # GPT-2 init: N(0, 0.02), scaled residual projections
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, past=None, last_only=False):
        """idx (B, T). With past (a list of per-layer (k, v)) the tokens continue those
        sequences. Returns logits ((B, T, V), or (B, 1, V) with last_only) and the new cache."""
        t0 = 0 if past is None else (past[0].n if isinstance(past[0], StaticLayer) else past[0][0].shape[2])
        pos = torch.arange(t0, t0 + idx.shape[1], dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        cache = []
        for i, block in enumerate(self.h):
            x, kv = block(x, None if past is None else past[i])
            cache.append(kv)
        x = self.ln_f(x)
        if last_only:
            x = x[:, -1:, :]
        return self.lm_head(x), cache


def num_params(model):
    return sum(p.numel() for p in model.parameters())  # the tied matrix counted once


def setup(threads, seed):
    """The model, built with threads intra-op threads and seeded init, and its build time."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    t = time.perf_counter()
    model = GPT()
    return model, time.perf_counter() - t


def blas_info():
    """The BLAS library this process loaded (Debian's torch calls the system BLAS: OpenBLAS
    through the alternatives) and, for OpenBLAS, the processor family whose kernels it runs,
    asked of the library itself: what the engine's figures are compared with."""
    path = ""
    with open("/proc/self/maps") as f:
        for line in f:
            name = line.split()[-1] if line.split() else ""
            if "openblas" in name or name.endswith(("libblas.so.3", "libmkl_rt.so")):
                path = name
                if "openblas" in name:
                    break
    core = ""
    if "openblas" in path:
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            core = lib.openblas_get_corename().decode()
        except OSError:
            pass
    return path, core


def kernel_info():
    """Which kernels torch's own operators dispatch to (its CPU capability) and the oneDNN
    version it carries, from torch.__config__.show()."""
    cfg = torch.__config__.show()
    cap = re.search(r"CPU capability usage: (.+)", cfg)  # AVX2, AVX512 or "NO AVX"
    dnn = re.search(r"MKL-DNN (v[\d.]+)", cfg)
    return (cap.group(1).strip() if cap else ""), (dnn.group(1) if dnn else "")


# oneDNN's dnnl_cpu_isa_t (dnnl_types.h, v2.x), named as ONEDNN_MAX_CPU_ISA takes them.
ONEDNN_ISAS = {0x1: "SSE41", 0x3: "AVX", 0x7: "AVX2", 0xF: "AVX512_MIC", 0x1F: "AVX512_MIC_4OPS",
               0x27: "AVX512_CORE", 0x67: "AVX512_CORE_VNNI", 0xE7: "AVX512_CORE_BF16",
               0x3E7: "AVX512_CORE_AMX", 0x407: "AVX2_VNNI"}


def onednn_isa():
    """The instruction set oneDNN's kernels use in this process (after ONEDNN_MAX_CPU_ISA), asked
    of the oneDNN library torch loaded; "" where it cannot be asked."""
    with open("/proc/self/maps") as f:
        paths = [line.split()[-1] for line in f if "libdnnl" in line or "libmkldnn" in line]
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
            isa = lib.dnnl_get_effective_cpu_isa()
        except (OSError, AttributeError):
            continue
        return ONEDNN_ISAS.get(isa, hex(isa))
    return ""


def env_info(model, threads, init_s):
    """What the JSON says about the process besides its timings."""
    blas, core = blas_info()
    cap, dnn = kernel_info()
    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "threads_asked": threads,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
        "blas": blas,
        "blas_core": core,
        "cpu_capability": cap,
        "onednn": dnn,
        "onednn_isa": onednn_isa(),
        "params": num_params(model),
        "init_s": init_s,
    }


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def cpu_ms():
    """CPU time of this process (all threads): user + system, and system alone, in ms."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r.ru_utime + r.ru_stime) * 1e3, r.ru_stime * 1e3


def measure(fn):
    """One call of fn: wall ms, CPU ms and system ms, plus whatever fn returns (a dict)."""
    c0, s0 = cpu_ms()
    t = time.perf_counter()
    extra = fn() or {}
    ms = (time.perf_counter() - t) * 1e3
    c1, s1 = cpu_ms()
    return dict(extra, ms=ms, cpu_ms=c1 - c0, sys_ms=s1 - s0)


def common_args(ap, ops):
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="torch.set_num_threads")
    ap.add_argument("--ops", default=",".join(ops), help="comma list of what to time: " + ", ".join(ops))
    ap.add_argument("--runs", type=int, default=5, help="timed runs of each op")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs of each op before them")
    ap.add_argument("--serve", action="store_true",
                    help="serve requests instead: print a JSON line with the process info, then "
                         "answer every op name read from stdin with one JSON line of its timing "
                         "(how cmd/rookbench interleaves PyTorch runs with the engine's)")
    ap.add_argument("--seed", type=int, default=42)


def run_ops(ops, info, args):
    """Times ops (name -> function) as the arguments ask and prints JSON on stdout."""
    if args.serve:
        print(json.dumps(dict(info, ready=True)), flush=True)
        for line in sys.stdin:
            op = line.strip()
            if not op:
                continue
            if op in ops:
                reply = dict(measure(ops[op]), op=op)
            else:
                reply = {"op": op, "error": f"unknown op {op!r}; this script has {', '.join(ops)}"}
            print(json.dumps(reply), flush=True)
        return
    runs = {}
    for op in args.ops.split(","):
        if op not in ops:
            sys.exit(f"unknown op {op!r}; this script has {', '.join(ops)}")
        for _ in range(args.warmup):
            ops[op]()
        runs[op] = []
        for i in range(args.runs):
            runs[op].append(measure(ops[op]))
            log(f"  torch {op} {i + 1}/{args.runs}: {runs[op][-1]['ms']:.1f} ms")
    print(json.dumps(dict(info, runs=runs)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common_args(ap, ["forward", "train"])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    args = ap.parse_args()

    model, init_s = setup(args.threads, args.seed)
    info = env_info(model, args.threads, init_s)
    info.update(batch=args.batch, seq=args.seq)
    g = torch.Generator().manual_seed(args.seed + 1)
    x = torch.randint(0, VOCAB, (args.batch, args.seq), generator=g)
    y = torch.randint(0, VOCAB, (args.batch, args.seq), generator=g)
    opt = None

    def forward():
        model.eval()
        with torch.no_grad():
            logits, _ = model(x)
            loss = F.cross_entropy(logits.view(-1, VOCAB), y.view(-1))
        return {"loss": loss.item()}

    def train():
        nonlocal opt
        model.train()
        if opt is None:
            # torch 1.13 has no fused AdamW; foreach=False is its CPU default (one tensor at a time).
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8,
                                    weight_decay=0.0, foreach=False)
        logits, _ = model(x)
        loss = F.cross_entropy(logits.view(-1, VOCAB), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return {"loss": loss.item()}

    run_ops({"forward": forward, "train": train}, info, args)


if __name__ == "__main__":
    main()
