#!/usr/bin/env python3
"""Reference fixture for scripts/advantages.lua and scripts/losses.lua.

Writes algorithms_fixture.lua beside this script: a Lua table of shared inputs (rewards in
groups, two reward components, completion lengths, per-token log-probabilities now, at
sampling time and under the reference, per-completion advantages) and, for each estimator and
loss, what its reference computes. The references are transcribed from their sources, in the
sources' own order of operations:

  rloo          Ahmadian et al. 2024 (arXiv:2402.14740): r_i - (sum_j r_j - r_i) / (G - 1)
  reinforce_pp  verl, trainer/ppo/core_algos.py, compute_reinforce_plus_plus_baseline_outcome_
                advantage (REINFORCE++, arXiv:2501.03262): scores - group mean, broadcast to
                every response token, then verl_F.masked_whiten over the batch's tokens
                (masked_mean; masked_var with Bessel's correction; * rsqrt(var + 1e-8)); and
                compute_reinforce_plus_plus_outcome_advantage (no baseline, gamma = 1: each
                token's return is the outcome reward)
  gdpo          TRL v1.9.0, GRPOTrainer._generate_and_score_completions with
                multi_objective_aggregation = "normalize_then_sum": per component
                (r - nanmean) / (nanstd + 1e-4) within each group, weighted nansum, then
                (R - R.mean()) / (R.std() + 1e-4); torch's std is unbiased
  kl_shaped     tinker-cookbook, tinker_cookbook/rl (incorporate_kl_penalty): d = sampled -
                base logprobs, avg = sum(d) / sum(mask), advantages += coef * (avg - d), with
                kl_discount_factor > 0 the discounted future sum of that
  cispo         TRL v1.9.0, GRPOTrainer._compute_loss, loss_type "cispo":
                -clamp(coef_1, max=epsilon_high).detach() * advantages * per_token_logps,
                (l * mask).sum() / num_items_in_batch
  dro           Tinker docs, losses/dro: -(target_logprobs * advantages
                - 0.5 * beta * (target_logprobs - sampling_logprobs) ** 2).sum()
  luspo         TRL v1.9.0, GRPOTrainer._compute_loss, loss_type "luspo",
                importance_sampling_level "sequence": coef_1 = exp(masked mean log ratio),
                per_token_loss = -min(coef_1 A, clamp(coef_1, 1 - eps, 1 + eps_high) A), (B, 1);
                (per_token_loss * mask.sum(1, keepdim=True)).mean()

Gradients dL/dlogp come from forward-mode automatic differentiation (dual numbers), one token
at a time, with .detach() as taking the value: not from the derivatives the Lua code writes.
Only Python's standard library is used; floats are written with repr, exactly. Reruns produce
identical bytes. Regenerate with

    python3 scripts/tests/testdata/gen_algorithms_fixture.py
"""

import math
import os
import random

SEED = 11
G, GROUPS, MAXLEN = 4, 3, 6


class D:
    """A dual number a + b·ε (ε² = 0): value and derivative along one direction."""

    def __init__(self, a, b=0.0):
        self.a, self.b = float(a), float(b)

    def _d(x):
        return x if isinstance(x, D) else D(x)

    def __add__(s, o):
        o = D._d(o)
        return D(s.a + o.a, s.b + o.b)

    __radd__ = __add__

    def __sub__(s, o):
        o = D._d(o)
        return D(s.a - o.a, s.b - o.b)

    def __rsub__(s, o):
        return D._d(o) - s

    def __mul__(s, o):
        o = D._d(o)
        return D(s.a * o.a, s.a * o.b + s.b * o.a)

    __rmul__ = __mul__

    def __truediv__(s, o):
        o = D._d(o)
        return D(s.a / o.a, (s.b * o.a - s.a * o.b) / (o.a * o.a))

    def __rtruediv__(s, o):
        return D._d(o) / s

    def __neg__(s):
        return D(-s.a, -s.b)

    def __pow__(s, k):
        return D(s.a**k, k * s.a ** (k - 1) * s.b)


def exp(x):
    x = D._d(x)
    e = math.exp(x.a)
    return D(e, e * x.b)


def dmin(x, y):  # torch.min: the smaller operand's value and gradient (ties: the first)
    x, y = D._d(x), D._d(y)
    return x if x.a <= y.a else y


def clamp(x, lo=None, hi=None):  # torch.clamp: no gradient where it binds
    x = D._d(x)
    if lo is not None and x.a < lo:
        return D(lo)
    if hi is not None and x.a > hi:
        return D(hi)
    return x


def detach(x):
    return D(D._d(x).a)


def grad(loss_fn, logp):
    """loss_fn(logp as duals) → dual loss; returns the loss and dL/dlogp per token."""
    value, g = None, []
    for i, row in enumerate(logp):
        gr = []
        for t in range(len(row)):
            x = [[D(v, 1.0 if (k, s) == (i, t) else 0.0) for s, v in enumerate(r)] for k, r in enumerate(logp)]
            out = loss_fn(x)
            value = out.a
            gr.append(out.b)
        g.append(gr)
    return value, g


def inputs():
    r = random.Random(SEED)
    n = G * GROUPS
    lengths = [r.randint(1, MAXLEN) for _ in range(n)]
    rewards = [round(r.uniform(-0.3, 1.0), 3) for _ in range(n)]
    comp_a = [float(r.choice([0, 0.5, 1])) for _ in range(n)]
    comp_b = [round(r.uniform(0, 1), 3) for _ in range(n)]
    comp_b[5] = math.nan  # a component that does not apply to one completion
    sampled = [[-0.05 - 3 * r.random() for _ in range(l)] for l in lengths]
    logp = [[x + 0.3 * r.gauss(0, 1) for x in row] for row in sampled]
    ref = [[x + 0.3 * r.gauss(0, 1) for x in row] for row in sampled]
    adv = [r.gauss(0, 1) for _ in range(n)]
    return dict(lengths=lengths, rewards=rewards, components=[comp_a, comp_b], sampled=sampled,
                logp=logp, ref=ref, advantages=adv)


def rloo(rw):
    out = []
    for g in range(GROUPS):
        grp = rw[g * G:(g + 1) * G]
        out += [x - (sum(grp) - x) / (G - 1) for x in grp]
    return out


def masked_whiten(values, lengths):
    # values broadcast to each completion's tokens; mask = the response tokens
    tokens = [v for v, l in zip(values, lengths) for _ in range(l)]
    m = sum(tokens) / len(tokens)
    var = sum((x - m) ** 2 for x in tokens) / len(tokens)
    var = var * len(tokens) / (len(tokens) - 1)
    rs = 1 / math.sqrt(var + 1e-8)
    return [(v - m) * rs for v in values]


def reinforce_pp(rw, lengths, baseline):
    scores = list(rw)
    if baseline:
        for g in range(GROUPS):
            grp = rw[g * G:(g + 1) * G]
            mean = sum(grp) / G
            for j in range(G):
                scores[g * G + j] = rw[g * G + j] - mean
    return masked_whiten(scores, lengths)


def nanmean(v):
    k = [x for x in v if not math.isnan(x)]
    return sum(k) / len(k)


def nanstd(v):  # TRL's nanstd: unbiased
    k = [x for x in v if not math.isnan(x)]
    m = sum(k) / len(k)
    return math.sqrt(sum((x - m) ** 2 for x in k) / (len(k) - 1))


def gdpo(components, weights):
    n = G * GROUPS
    total = [0.0] * n
    for comp, w in zip(components, weights):
        for g in range(GROUPS):
            grp = comp[g * G:(g + 1) * G]
            m, s = nanmean(grp), nanstd(grp)
            for j in range(G):
                v = (grp[j] - m) / (s + 1e-4) * w
                if not math.isnan(v):  # nansum
                    total[g * G + j] += v
    m = sum(total) / n
    s = math.sqrt(sum((x - m) ** 2 for x in total) / (n - 1))
    return [(x - m) / (s + 1e-4) for x in total]


def kl_shaped(adv, sampled, ref, coef, discount):
    diffs = [[s - b for s, b in zip(rs, rb)] for rs, rb in zip(sampled, ref)]
    avg = sum(sum(d) for d in diffs) / sum(len(d) for d in diffs)
    out = []
    for a, d in zip(adv, diffs):
        pen = [coef * (avg - x) for x in d]
        if discount > 0:
            for t in range(len(pen) - 2, -1, -1):
                pen[t] = pen[t] + discount * pen[t + 1]
        out.append([a + p for p in pen])
    return out


def cispo(x, inp, eps_high):
    tokens = sum(inp["lengths"])
    total = D(0)
    for row, old, a in zip(x, inp["sampled"], inp["advantages"]):
        for lp, q in zip(row, old):
            coef = exp(lp - q)
            total = total + (-detach(clamp(coef, hi=eps_high)) * a * lp)
    return total / tokens


def dro(x, inp, beta):
    total = D(0)
    for row, old, a in zip(x, inp["sampled"], inp["advantages"]):
        for lp, q in zip(row, old):
            total = total + (lp * a - 0.5 * beta * (lp - q) ** 2)
    return -total


def luspo(x, inp, eps, eps_high):
    per = []
    for row, old, a in zip(x, inp["sampled"], inp["advantages"]):
        lw = D(0)
        for lp, q in zip(row, old):
            lw = lw + (lp - q)
        coef1 = exp(lw / len(row))
        coef2 = clamp(coef1, 1 - eps, 1 + eps_high)
        per.append(-dmin(coef1 * a, coef2 * a) * len(row))
    return sum(per, D(0)) / len(per)


def lua(v, indent=""):
    if isinstance(v, dict):
        inner = indent + "  "
        return "{\n" + "".join(f"{inner}{k} = {lua(v[k], inner)},\n" for k in sorted(v)) + indent + "}"
    if isinstance(v, (list, tuple)):
        return "{ " + ", ".join(lua(x, indent) for x in v) + " }"
    if isinstance(v, float):
        return "0/0" if math.isnan(v) else repr(v)
    return repr(v)


def main():
    inp = inputs()
    out = {}
    out["rloo"] = rloo(inp["rewards"])
    out["reinforce_pp_baseline"] = reinforce_pp(inp["rewards"], inp["lengths"], True)
    out["reinforce_pp"] = reinforce_pp(inp["rewards"], inp["lengths"], False)
    out["gdpo"] = gdpo(inp["components"], [1.0, 0.5])
    out["kl_shaped"] = kl_shaped(inp["advantages"], inp["sampled"], inp["ref"], 0.1, 0.0)
    out["kl_shaped_discounted"] = kl_shaped(inp["advantages"], inp["sampled"], inp["ref"], 0.1, 0.9)
    for name, fn in [("cispo", lambda x: cispo(x, inp, 1.1)), ("dro", lambda x: dro(x, inp, 0.1)),
                     ("luspo", lambda x: luspo(x, inp, 0.2, 0.28))]:
        loss, g = grad(fn, inp["logp"])
        out[name] = {"loss": loss, "dlogp": g}
    settings = {"cispo": {"epsilon_high": 1.1}, "dro": {"beta": 0.1}, "luspo": {"epsilon": 0.2, "epsilon_high": 0.28},
                "gdpo_weights": [1.0, 0.5], "kl_coef": 0.1, "kl_discount": 0.9, "group": G}
    text = ("-- Generated by gen_algorithms_fixture.py (beside this file); do not edit.\n"
            "return " + lua({"inputs": inp, "want": out, "settings": settings}) + "\n")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "algorithms_fixture.lua")
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
