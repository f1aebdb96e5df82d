#!/usr/bin/env python3
"""TRL-parity fixture for engine/grpo, computed with PyTorch from TRL's published formulas.

Writes trl_fixture.json beside this script: shared inputs (rewards, completion lengths,
truncation flags, per-token log-probabilities under the policy, at sampling time and under
the reference, per-token entropies) and, for each case, the settings under their canonical
rookscript names, the advantages, the loss, dL/dlogp and dL/dentropy per token; then, for
single groups of rewards near a tie, TRL's zero-std flag and advantages.

Semantics reproduced: TRL v1.9.0 (huggingface/trl, trl/trainer/grpo_trainer.py; tag commit
35def3ee), which includes huggingface/trl#6439 (commit 7c1fa85a, "Fix GRPO truncated-completion
loss normalization"):

  GRPOTrainer._generate_and_score_completions
    advantages = rewards - group mean; divided by (std + 1e-4) unless scale_rewards == "none",
    std = nanstd (Bessel, ddof 1) of the group ("group") or of the whole batch ("batch");
    is_std_zero = torch.isclose(std, 0), i.e. |std| <= 1e-8 (atol 1e-8; rtol * |0| = 0);
    num_items_in_batch = completion tokens (EOS included) counted AFTER
    mask_truncated_completions zeroes the truncated rows of completion_mask (#6439; TRL up
    to v1.8 counted them before, so masked tokens stayed in dapo's denominator).
  GRPOTrainer._compute_loss
    log_ratio = logp - old_logp (old = logp.detach() when num_iterations == 1);
    importance_sampling_level "sequence": the masked mean of log_ratio per row, (B, 1);
    coef_1 = exp(.), coef_2 = clamp(coef_1, 1 - epsilon, 1 + epsilon_high);
    per_token_loss = -min(coef_1 A, coef_2 A) + beta * (exp(ref - logp) - (ref - logp) - 1);
    grpo:    ((l * mask).sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    bnpo:    (l * mask).sum() / mask.sum().clamp(min=1)
    dr_grpo: (l * mask).sum() / (B * max_completion_length)
    dapo:    (l * mask).sum() / num_items_in_batch.clamp(min=1)
    entropy_coef (TRL >= v1.8): -c * (H * mask).sum() / num_items_in_batch for dapo and
      -c * (H * mask).sum() / mask.sum().clamp(min=1) otherwise: the masked token mean either way
  for one optimizer step on one generation batch, on one process, with the whole batch as
  the per-device batch (steps_per_generation = gradient_accumulation_steps = 1): the
  minibatch is the batch, so TRL's division by the accumulation steps is by 1 and bnpo's
  "local batch" is the batch. Later TRL releases warn when importance_sampling_level =
  "sequence" meets a token-summed loss (huggingface/trl#6042); the numbers are unchanged.

Loss types and settings added to TRL after v1.9.0, as TRL's main branch at commit f2cd577
(v1.10.0.dev0) computes them in GRPOTrainer._compute_loss:
  cispo: per_token_loss = -clamp(coef_1, max=epsilon_high).detach() * A * logp, aggregated as dapo
    (sum over tokens / num_items_in_batch);
  sapo:  per_token_loss = -sigmoid(tau * (coef_1 - 1)) * 4 / tau * A, tau = sapo_temperature_pos
    where A > 0 and sapo_temperature_neg elsewhere, aggregated as grpo;
  top_entropy_quantile rho < 1: get_high_entropy_mask(entropies, mask, 1 - rho): the torch.quantile
    (float32, linear interpolation) of the entropies of the unmasked tokens; the policy term is
    multiplied by (H >= threshold) before beta * KL is added, and the entropy bonus covers the same
    tokens: -c * (H * m).sum() / num_items_in_batch for dapo and cispo, / m.sum() otherwise,
    with m = mask * entropy_mask.

Settings TRL does not have, computed here the way trl_compat = true defines them:
  kl_estimator k1 / k2 replace TRL's k3 term (logp - ref; (logp - ref)^2 / 2);
  drop_zero_std masks the rows of groups without reward variance the way
    mask_truncated_completions masks truncated rows (so num_items_in_batch leaves them out too).

Cases with "trl_compat": false use rookscript's own conventions instead: population std
(ddof 0), masked rows removed from every denominator (sequence count, token count), and the
entropy term weighted by the loss's own aggregation.

Everything is float64 from inputs rounded to float32, so a float32 engine is compared against
the exact answer for exactly the inputs it reads. Reruns produce identical bytes.
Regenerate with `make fixtures` (or /usr/bin/python3 engine/grpo/testdata/gen_trl_fixture.py).
"""

import json
import os

import numpy as np
import torch

torch.set_default_dtype(torch.float64)

SEED = 7
PROMPTS, G, L = 3, 4, 6  # 3 prompts × 4 completions, max_completion_length 6
STD_EPS = 1e-4
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trl_fixture.json")


def f32(x):
    return np.asarray(x, dtype=np.float32).astype(np.float64)


def make_inputs():
    rng = np.random.default_rng(SEED)
    b = PROMPTS * G
    lengths = np.array([6, 3, 5, 6, 2, 6, 4, 1, 5, 6, 3, 2])  # 6 = max_completion_length: truncated
    assert len(lengths) == b
    rewards = [0.3, -0.3, 1.0, 0.55,  # a group with signal
               0.7, 0.7, 0.7, 0.7,  # a tie: std 1e-16 or 0, no signal
               1.0, 0.0, 0.0, 0.25]
    logp = f32(-rng.uniform(0.05, 4.0, size=(b, L)))
    old = f32(logp + rng.normal(0.0, 0.3, size=(b, L)))  # a later iteration: some tokens clip
    ref = f32(logp + rng.normal(0.0, 0.2, size=(b, L)))
    entropy = f32(rng.uniform(0.1, 3.0, size=(b, L)))
    mask = (np.arange(L)[None, :] < lengths[:, None]).astype(np.float64)
    # Positions past a completion's end hold zeros, as padding would.
    return {
        "rewards": rewards, "lengths": lengths.tolist(), "truncated": (lengths == L).tolist(),
        "logp": logp * mask, "old": old * mask, "ref": ref * mask, "entropy": entropy * mask, "mask": mask,
    }


def advantages(rewards, scale, ddof):
    r = torch.tensor(rewards)
    grouped = r.view(-1, G)
    mean = grouped.mean(dim=1).repeat_interleave(G)
    if scale in ("group", "none"):
        std = grouped.std(dim=1, unbiased=ddof == 1).repeat_interleave(G)
    else:
        std = r.std(unbiased=ddof == 1).expand_as(r)
    adv = r - mean
    if scale != "none":
        adv = adv / (std + STD_EPS)
    group_std = grouped.std(dim=1, unbiased=ddof == 1).repeat_interleave(G)
    zero_std = torch.isclose(group_std, torch.zeros_like(group_std))
    return adv, zero_std


def kl_term(estimator, logp, ref):
    if estimator == "k1":
        return logp - ref
    if estimator == "k2":
        return 0.5 * (logp - ref) ** 2
    return torch.exp(ref - logp) - (ref - logp) - 1


def compute(inp, s):
    trl = s["trl_compat"]
    ddof = 1 if trl else 0
    adv, zero_std = advantages(inp["rewards"], s["scale_rewards"], ddof)
    mask_all = torch.tensor(inp["mask"])
    truncated = torch.tensor(inp["truncated"])
    masked_rows = torch.zeros(len(adv), dtype=torch.bool)
    if s["mask_truncated_completions"]:
        masked_rows |= truncated
    if s["drop_zero_std"]:
        masked_rows |= zero_std
    mask = mask_all * (~masked_rows).unsqueeze(1).double()
    num_items_in_batch = mask.sum()  # after the masking, as TRL counts it since #6439

    logp = torch.tensor(inp["logp"], requires_grad=True)
    entropy = torch.tensor(inp["entropy"], requires_grad=True)
    old = logp.detach() if s["num_iterations"] == 1 else torch.tensor(inp["old"])
    ref = torch.tensor(inp["ref"])

    log_ratio = logp - old
    if s["importance_sampling_level"] == "token":
        liw = log_ratio
    else:
        liw = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    coef_1 = torch.exp(liw)
    eps_high = s["epsilon_high"] or s["epsilon"]
    a = adv.unsqueeze(1)
    if s["loss_type"] == "cispo":
        per_token_loss = -torch.clamp(coef_1, max=eps_high).detach() * a * logp
    elif s["loss_type"] == "sapo":
        tau = torch.where(a > 0, s.get("sapo_temperature_pos", 1.0), s.get("sapo_temperature_neg", 1.05))
        per_token_loss = -torch.sigmoid(tau * (coef_1 - 1)) * 4 / tau * a
    else:
        coef_2 = torch.clamp(coef_1, 1 - s["epsilon"], 1 + eps_high)
        per_token_loss = -torch.min(coef_1 * a, coef_2 * a)
    entropy_mask = torch.ones_like(mask)
    rho = s.get("top_entropy_quantile", 1.0)
    if rho < 1.0:  # TRL's get_high_entropy_mask, one process
        local = entropy.detach()[mask.bool()].float()
        threshold = torch.quantile(local, 1 - rho)
        entropy_mask = ((entropy.detach() * mask.float()) >= threshold).double() * mask
        per_token_loss = per_token_loss * entropy_mask
    if s["beta"] != 0.0:
        per_token_loss = per_token_loss + s["beta"] * kl_term(s["kl_estimator"], logp, ref)
    per_token_loss = per_token_loss.expand_as(logp)

    def aggregate(x):
        kind = s["loss_type"]
        if trl:  # TRL's branches, verbatim
            if kind in ("grpo", "sapo"):
                return ((x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
            if kind == "bnpo":
                return (x * mask).sum() / mask.sum().clamp(min=1.0)
            if kind == "dr_grpo":
                return (x * mask).sum() / (x.size(0) * L)
            return (x * mask).sum() / num_items_in_batch.clamp(min=1.0)
        kept = ~masked_rows  # rookscript: masked rows leave every denominator
        if kind in ("grpo", "sapo"):
            return ((x * mask).sum(-1) / mask.sum(-1).clamp(min=1.0))[kept].mean()
        if kind == "dr_grpo":
            return (x * mask).sum() / (kept.sum() * L)
        return (x * mask).sum() / mask.sum()  # bnpo and dapo coincide

    loss = aggregate(per_token_loss)
    if s["entropy_coef"] != 0.0:
        eff = mask * entropy_mask
        if trl and s["loss_type"] in ("dapo", "cispo"):
            loss = loss - s["entropy_coef"] * (entropy * eff).sum() / num_items_in_batch
        elif trl:
            loss = loss - s["entropy_coef"] * (entropy * eff).sum() / eff.sum().clamp(min=1.0)
        else:
            loss = loss - s["entropy_coef"] * aggregate(entropy * entropy_mask)
    loss.backward()
    return {
        "advantages": adv.tolist(), "loss": loss.item(), "dlogp": (logp.grad * mask_all).tolist(),
        "dentropy": None if entropy.grad is None else (entropy.grad * mask_all).tolist(),
    }


BASE = {"trl_compat": True, "loss_type": "dapo", "scale_rewards": "group", "importance_sampling_level": "token",
        "epsilon": 0.2, "epsilon_high": 0.0, "beta": 0.0, "kl_estimator": "k3", "entropy_coef": 0.0,
        "mask_truncated_completions": False, "drop_zero_std": False, "num_iterations": 2}


def cases():
    out = []

    def add(name, **kw):
        s = dict(BASE)
        s.update(kw)
        out.append((name, s))

    for loss in ("grpo", "bnpo", "dr_grpo", "dapo"):
        for level in ("token", "sequence"):
            add(f"{loss}/{level}", loss_type=loss, importance_sampling_level=level)
            add(f"{loss}/{level}/beta", loss_type=loss, importance_sampling_level=level, beta=0.04)
        add(f"{loss}/mask_truncated", loss_type=loss, beta=0.04, mask_truncated_completions=True)
    add("dapo/scale_batch", scale_rewards="batch", beta=0.04)
    add("dapo/scale_none", scale_rewards="none", beta=0.04)
    add("dapo/epsilon_high", epsilon_high=0.28, beta=0.04)
    add("dapo/on_policy", num_iterations=1, beta=0.04)
    add("grpo/sequence/on_policy", loss_type="grpo", importance_sampling_level="sequence", num_iterations=1)
    add("dapo/k1", beta=0.04, kl_estimator="k1")
    add("dapo/k2", beta=0.04, kl_estimator="k2")
    add("grpo/entropy/mask_truncated", loss_type="grpo", entropy_coef=0.01, beta=0.04, mask_truncated_completions=True)
    add("dapo/entropy", entropy_coef=0.01)
    add("dapo/entropy/mask_truncated", entropy_coef=0.01, mask_truncated_completions=True)
    add("grpo/drop_zero_std", loss_type="grpo", beta=0.04, drop_zero_std=True)
    add("dapo/drop_zero_std/mask_truncated", beta=0.04, drop_zero_std=True, mask_truncated_completions=True)
    # TRL v1.10.0.dev0's cispo and sapo, and top_entropy_quantile.
    add("cispo", loss_type="cispo", epsilon_high=1.1, beta=0.04)
    add("cispo/mask_truncated/entropy", loss_type="cispo", epsilon_high=1.1, mask_truncated_completions=True,
        entropy_coef=0.01)
    add("sapo", loss_type="sapo", beta=0.04)
    add("sapo/temperatures", loss_type="sapo", sapo_temperature_pos=0.5, sapo_temperature_neg=2.0)
    add("dapo/top_entropy_0.2", top_entropy_quantile=0.2, beta=0.04)
    add("grpo/top_entropy_0.5/entropy", loss_type="grpo", top_entropy_quantile=0.5, entropy_coef=0.01)
    add("dapo/top_entropy_0.3/entropy/mask_truncated", top_entropy_quantile=0.3, entropy_coef=0.01,
        mask_truncated_completions=True)
    add("grpo/sequence/top_entropy_0.25", loss_type="grpo", importance_sampling_level="sequence",
        top_entropy_quantile=0.25)
    add("dapo/top_entropy_0", top_entropy_quantile=0.0)
    add("sapo/top_entropy_0.4", loss_type="sapo", top_entropy_quantile=0.4, beta=0.04)
    # rookscript's own conventions.
    add("own/grpo", trl_compat=False, loss_type="grpo", beta=0.04)
    add("own/grpo/drop_zero_std/mask_truncated", trl_compat=False, loss_type="grpo", beta=0.04, drop_zero_std=True,
        mask_truncated_completions=True)
    add("own/dr_grpo/mask_truncated", trl_compat=False, loss_type="dr_grpo", mask_truncated_completions=True)
    add("own/dapo/drop_zero_std", trl_compat=False, beta=0.04, drop_zero_std=True)
    add("own/grpo/entropy", trl_compat=False, loss_type="grpo", entropy_coef=0.01, mask_truncated_completions=True)
    add("own/dapo/scale_batch/sequence", trl_compat=False, scale_rewards="batch", importance_sampling_level="sequence")
    add("own/grpo/top_entropy_0.2/entropy", trl_compat=False, loss_type="grpo", top_entropy_quantile=0.2,
        entropy_coef=0.01, drop_zero_std=True)
    return out


TIE_GROUPS = [  # one group of G rewards each: equal, rounding, shaping noise, TRL's bound, large scale
    [0.5] * G, [0.7] * G,
    [-0.3 + 5e-9, -0.3 - 5e-9, -0.3 + 5e-9, -0.3 - 5e-9],
    [8.5e-9, -8.5e-9, 8.5e-9, -8.5e-9], [9e-9, -9e-9, 9e-9, -9e-9],
    [1000 + 1e-6, 1000 - 1e-6, 1000 + 1e-6, 1000 - 1e-6],
    [0.5 + 5e-7, 0.5 - 5e-7, 0.5 + 5e-7, 0.5 - 5e-7],
]


def ties():
    """TRL's zero-std flag and advantages (scale_rewards "group") for each of TIE_GROUPS."""
    out = []
    for rewards in TIE_GROUPS:
        adv, zero_std = advantages(rewards, "group", 1)
        out.append({"rewards": rewards, "is_std_zero": bool(zero_std[0]), "advantages": adv.tolist()})
    return out


def rounded(x):
    if isinstance(x, list):
        return [rounded(v) for v in x]
    if x is None or isinstance(x, (bool, int)):
        return x
    return float(f"{x:.12g}")


def main():
    inp = make_inputs()
    doc = {
        "about": "written by gen_trl_fixture.py: TRL v1.9.0 GRPO loss semantics, cispo, sapo and "
                 "top_entropy_quantile as TRL v1.10.0.dev0 (f2cd577), see its docstring",
        "group": G, "max_completion_length": L,
        "inputs": {k: rounded(v.tolist() if isinstance(v, np.ndarray) else v) for k, v in inp.items() if k != "mask"},
        "cases": [],
    }
    for name, s in cases():
        doc["cases"].append({"name": name, "settings": s, **{k: rounded(v) for k, v in compute(inp, s).items()}})
    doc["ties"] = [{k: rounded(v) for k, v in t.items()} for t in ties()]
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
