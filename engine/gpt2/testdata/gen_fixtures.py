#!/usr/bin/env python3
"""Golden fixtures for engine/gpt2, computed with PyTorch.

Writes into testdata/tiny/ beside this script:
  config.json, model.safetensors  a tiny GPT-2 as a Hugging Face GPT2LMHeadModel directory
                                  (Conv1D (in, out) weights, "transformer." names, tied head)
  model.bin                       the same weights as an llm.c checkpoint (version 3, Vp=128)
  fixture.safetensors             a packed batch, its logits, logprobs, entropies, loss,
                                  parameter gradients and the weights after 3 AdamW steps

The model is nanoGPT's GPT-2 (tanh GELU, LayerNorm eps 1e-5, tied LM head, no dropout) written
functionally over a dict keyed by the engine's tensor names, with matrices (out, in) as the
engine stores them. Sizes are odd on purpose (V=67, T=24, L=2, NH=3, C=24, head size 8).

The reference is computed in float64 from the float32 weights and inputs that are stored, so
a float32 engine is compared against the exact answer for exactly those inputs. Reruns produce
identical bytes. Regenerate with `make fixtures`.
"""

import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

V, T, L, NH, C = 67, 24, 2, 3, 24
EPS = 1e-5
SEED = 1234
LENS = [5, 11, 8]
TAU = 0.8
ADAMW = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
ADAMW_STEPS = 3
VP = 128  # llm.c pads the vocabulary to a multiple of 128

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny")

# Per-block tensors in llm.c / engine Layout order, with shapes (matrices (out, in)).
BLOCK = [
    ("ln_1.weight", (C,)), ("ln_1.bias", (C,)),
    ("attn.c_attn.weight", (3 * C, C)), ("attn.c_attn.bias", (3 * C,)),
    ("attn.c_proj.weight", (C, C)), ("attn.c_proj.bias", (C,)),
    ("ln_2.weight", (C,)), ("ln_2.bias", (C,)),
    ("mlp.c_fc.weight", (4 * C, C)), ("mlp.c_fc.bias", (4 * C,)),
    ("mlp.c_proj.weight", (C, 4 * C)), ("mlp.c_proj.bias", (C,)),
]
CONV1D = {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"}


def layout():
    """(name, shape) of every parameter in checkpoint order."""
    out = [("wte.weight", (V, C)), ("wpe.weight", (T, C))]
    for group, shape in BLOCK:
        out += [(f"h.{i}.{group}", shape) for i in range(L)]
    return out + [("ln_f.weight", (C,)), ("ln_f.bias", (C,))]


def init_params(g):
    """float32 weights: matrices N(0, 0.02); LayerNorm weights 1 + 0.1 N and every bias
    0.05 N, so that errors in those gradients are not hidden behind zeros and ones."""
    p = {}
    for name, shape in layout():
        x = torch.randn(shape, generator=g, dtype=torch.float32)
        if len(shape) == 2:
            p[name] = 0.02 * x
        elif name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            p[name] = 1 + 0.1 * x
        else:
            p[name] = 0.05 * x
    return p


def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(p, idx):
    """Logits (t, V) of one sequence; positions start at 0."""
    t = idx.shape[0]
    hs = C // NH
    x = p["wte.weight"][idx] + p["wpe.weight"][:t]
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    for i in range(L):
        b = lambda n: p[f"h.{i}.{n}"]
        h = F.layer_norm(x, (C,), b("ln_1.weight"), b("ln_1.bias"), EPS)
        q, k, v = F.linear(h, b("attn.c_attn.weight"), b("attn.c_attn.bias")).split(C, dim=-1)
        q, k, v = (z.view(t, NH, hs).transpose(0, 1) for z in (q, k, v))  # (NH, t, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(0, 1).reshape(t, C)
        x = x + F.linear(y, b("attn.c_proj.weight"), b("attn.c_proj.bias"))
        h = F.layer_norm(x, (C,), b("ln_2.weight"), b("ln_2.bias"), EPS)
        h = gelu(F.linear(h, b("mlp.c_fc.weight"), b("mlp.c_fc.bias")))
        x = x + F.linear(h, b("mlp.c_proj.weight"), b("mlp.c_proj.bias"))
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], EPS)
    return x @ p["wte.weight"].T  # tied LM head


def objective(p, batch):
    """L = -sum_r w_r logp_r + sum_r e_r H_r over rows, at temperature tau."""
    logits = torch.cat([forward(p, batch["tokens"][s:s + n]) for s, n in batch["seqs"]])
    logq = F.log_softmax(logits[batch["rows"]] / batch["tau"], dim=-1)
    logp = logq.gather(1, batch["targets"][:, None]).squeeze(1)
    ent = -(logq.exp() * logq).sum(-1)
    loss = -(batch["w"] * logp).sum() + (batch["e"] * ent).sum()
    return loss, logits, logp, ent


def f32(t):
    return ("F32", list(t.shape), t.detach().to(torch.float32).numpy().astype("<f4").tobytes())


def i32(t):
    return ("I32", list(t.shape), t.numpy().astype("<i4").tobytes())


def write_safetensors(path, tensors, metadata):
    """The reference layout: data ordered by dtype width (widest first) then name, header
    listing "__metadata__" first, compact JSON padded with spaces to a multiple of 8."""
    rank = {"F32": 11, "I32": 9}
    names = sorted(tensors, key=lambda n: (-rank[tensors[n][0]], n))
    header = {"__metadata__": dict(sorted(metadata.items()))}
    off = 0
    for n in names:
        dtype, shape, data = tensors[n]
        header[n] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for n in names:
            f.write(tensors[n][2])


def hf_config():
    """config.json as transformers' GPT2Config writes it; dropout 0 (the engine has none)."""
    return {
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
        "attn_pdrop": 0.0, "bos_token_id": None, "embd_pdrop": 0.0, "eos_token_id": None,
        "initializer_range": 0.02, "layer_norm_epsilon": EPS, "model_type": "gpt2",
        "n_ctx": T, "n_embd": C, "n_head": NH, "n_inner": None, "n_layer": L, "n_positions": T,
        "reorder_and_upcast_attn": False, "resid_pdrop": 0.0,
        "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True,
        "summary_activation": None, "summary_first_dropout": 0.0,
        "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
        "tie_word_embeddings": True, "torch_dtype": "float32", "use_cache": True,
        "vocab_size": V,
    }


def write_hf(params):
    with open(os.path.join(OUT, "config.json"), "w") as f:
        f.write(json.dumps(hf_config(), indent=2, sort_keys=True) + "\n")
    tensors = {}
    for name, _ in layout():
        t = params[name]
        if name.split(".", 2)[-1] in CONV1D:
            t = t.T.contiguous()  # Conv1D stores (in, out)
        tensors["transformer." + name] = f32(t)
    write_safetensors(os.path.join(OUT, "model.safetensors"), tensors, {"format": "pt"})


def write_llmc(params):
    header = np.zeros(256, dtype="<i4")
    header[:8] = [20240326, 3, T, V, L, NH, C, VP]
    with open(os.path.join(OUT, "model.bin"), "wb") as f:
        f.write(header.tobytes())
        for name, _ in layout():
            t = params[name]
            if name == "wte.weight":
                t = torch.cat([t, torch.zeros(VP - V, C)])
            f.write(f32(t)[2])


def main():
    torch.set_num_threads(1)  # fixed reduction order
    g = torch.Generator().manual_seed(SEED)
    params = init_params(g)

    n = sum(LENS)
    tokens = torch.randint(0, V, (n,), generator=g)
    starts = [sum(LENS[:i]) for i in range(len(LENS))]
    rows = torch.tensor([s + j for s, k in zip(starts, LENS) for j in range(k - 1)])
    targets = tokens[rows + 1]
    w = torch.randn(len(rows), generator=g, dtype=torch.float32)
    e = 0.1 * torch.randn(len(rows), generator=g, dtype=torch.float32)
    tau = torch.tensor([TAU], dtype=torch.float32)
    batch = dict(tokens=tokens, seqs=list(zip(starts, LENS)), rows=rows, targets=targets,
                 w=w.double(), e=e.double(), tau=tau.double()[0])

    # Gradients at the initial weights, in float64.
    p64 = {k: v.double().requires_grad_() for k, v in params.items()}
    loss, logits, logp, ent = objective(p64, batch)
    loss.backward()

    fx = {
        "tokens": i32(tokens), "lens": i32(torch.tensor(LENS)), "rows": i32(rows),
        "targets": i32(targets), "weights": f32(w), "ent_weights": f32(e), "tau": f32(tau),
        "logits": f32(logits), "logp": f32(logp), "entropy": f32(ent),
        "loss": f32(loss.reshape(1)),
    }
    for name, _ in layout():
        fx["grad." + name] = f32(p64[name].grad)

    # AdamW in float64, weight decay on matrices only (nanoGPT's param groups).
    q64 = {k: v.double().requires_grad_() for k, v in params.items()}
    names = [name for name, _ in layout()]
    opt = torch.optim.AdamW([
        {"params": [q64[k] for k in names if q64[k].dim() >= 2], "weight_decay": ADAMW["weight_decay"]},
        {"params": [q64[k] for k in names if q64[k].dim() < 2], "weight_decay": 0.0},
    ], lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"])
    losses = []
    for _ in range(ADAMW_STEPS):
        opt.zero_grad()
        step_loss = objective(q64, batch)[0]
        losses.append(step_loss.item())
        step_loss.backward()
        opt.step()
    fx["adamw.loss"] = f32(torch.tensor(losses))
    for name in names:
        fx["adamw." + name] = f32(q64[name])

    meta = {
        "format": "pt",
        "description": "tiny GPT-2 packed-batch objective; see gen_fixtures.py",
        "adamw_lr": repr(ADAMW["lr"]), "adamw_beta1": repr(ADAMW["betas"][0]),
        "adamw_beta2": repr(ADAMW["betas"][1]), "adamw_eps": repr(ADAMW["eps"]),
        "adamw_weight_decay": repr(ADAMW["weight_decay"]), "adamw_steps": str(ADAMW_STEPS),
        "adamw_decay": "tensors with 2 or more dimensions",
    }
    os.makedirs(OUT, exist_ok=True)
    write_hf(params)
    write_llmc(params)
    write_safetensors(os.path.join(OUT, "fixture.safetensors"), fx, meta)
    for f in ("config.json", "model.safetensors", "model.bin", "fixture.safetensors"):
        print(f"wrote {f} ({os.path.getsize(os.path.join(OUT, f))} bytes)")
    print(f"rows {len(rows)}, loss {loss.item():.10f}")


if __name__ == "__main__":
    main()
