#!/usr/bin/env python3
"""Golden values for the policy losses (SPEC 11): NeMo RL's clipped policy
gradient loss and DPO, written here from their formulas in float64, apart
from the C++ code they test (src/policy/clipped_pg_loss.cpp, dpo_loss.cpp).

Every case draws its inputs with its own seed, rounds them to float32 (so the
C++ side can run the very same numbers in float32 and in float64), and
records the loss, its gradient with respect to the current log-probs (by
torch.autograd in float64) and the metrics. All per-token tensors are aligned
with the logits: position t holds the values of token t + 1 (the C++ batches'
layout), so there is no shift here.

    python3 tests/golden/generate_policy_losses.py          # write tests/golden/policy_losses.json
    python3 tests/golden/generate_policy_losses.py --check  # recompute, compare with disk

Needs only torch (any 1.13+ or 2.x, CPU).

Clipped policy gradient, per position with mask m = token_mask * sample_mask:
    r   = exp(curr - prev)                       (sequence_level_importance_ratios:
                                                  exp(sum_t (curr - prev) tm / n_row) for the row)
    rc  = clamp(r, 1 - ratio_clip_min, 1 + ratio_clip_max)
    pg  = max(-A r, -A rc);  with ratio_clip_c = c:  pg = min(pg, -A c) where A < 0
    w   = exp(prev - gen)            (token level; sequence level: exp(sum_t (prev - gen) m) per row),
          NaN/inf -> 0, clamped to truncated_importance_sampling_ratio when set;
          1 without use_importance_sampling_correction
    kl  = beta * v * (exp(d) - d - 1),  d = clamp(ref - curr, -20, 20),
          v = exp(curr - gen) (detached, NaN/inf -> 0) with use_on_policy_kl_approximation, else 1
    token_level_loss:    loss = sum(w pg m) / G_tok + sum(kl m) / G_tok
    sequence level:      loss = sum_rows sm * (sum_t w pg tm / n_row) / G_seq + (the same for kl)
  metrics: probs_ratio = sum(r m) / G_tok, probs_ratio_clamped = sum(rc m) / G_tok,
           kl_penalty = kl term / beta (0 when beta = 0),
           token_mult_prob_error = sum(exp(|gen - prev| m) m) / G_tok,
           approx_entropy = -sum(exp(curr - gen) curr m) / G_tok,
           num_valid_samples = sum(sample_mask)
DPO (rows interleaved chosen, rejected, chosen, ...):
    reward_row = sum_t (curr - ref) tm   (/ max(sum tm, 1) with preference_average_log_probs)
    preference = sum_pairs -logsigmoid(beta (r_c - r_r)) sm_c / (G_seq / 2)
    nll_row    = -sum_t curr tm sm       (/ max(sum tm sm, 1) with sft_average_log_probs)
    sft        = sum_pairs nll_c sm_c / (G_seq / 2)   (0 unless sft_loss_weight > 0)
    loss       = sft_loss_weight * sft + preference_loss_weight * preference
  metrics: accuracy = sum (r_c > r_r) sm_c / (G/2), rewards_chosen_mean = sum r_c sm_c / (G/2),
           rewards_rejected_mean = sum r_r sm_r / (G/2), reward_margin = chosen - rejected mean,
           num_valid_samples = sum(sample_mask) / 2
Normalisers G are the global counts of the whole batch; each case passes
counts larger than its own rows' (other ranks' rows), so the division by the
global count, not the local one, is what is checked.
"""

import argparse
import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from generate import json_close  # noqa: E402  (numbers within 1e-11, relative)

OUT = os.path.join(HERE, "policy_losses.json")
B, T = 4, 7


def f32(t):
    return t.to(torch.float32).to(torch.float64)


def nan_to_zero(x):
    return torch.where(torch.isfinite(x), x, torch.zeros_like(x))


def pg_inputs(seed, spread=0.6, kl_extremes=False):
    g = torch.Generator().manual_seed(seed)
    curr = f32(-3.0 * torch.rand(B, T, generator=g, dtype=torch.float64) - 0.05)
    prev = f32(curr + spread * (2 * torch.rand(B, T, generator=g, dtype=torch.float64) - 1))
    gen = f32(prev + 0.3 * (2 * torch.rand(B, T, generator=g, dtype=torch.float64) - 1))
    ref = f32(curr + 1.5 * (2 * torch.rand(B, T, generator=g, dtype=torch.float64) - 1))
    if kl_extremes:  # beyond the KL clamp on both sides
        ref[0, 1] = curr[0, 1] + 25.0
        ref[1, 2] = curr[1, 2] - 24.0
    adv = f32(torch.randn(B, 1, generator=g, dtype=torch.float64).expand(B, T).clone())
    adv[2] = -adv[2].abs() - 0.5  # a row with negative advantages (dual clip)
    token_mask = (torch.rand(B, T, generator=g) > 0.25).to(torch.float64)
    token_mask[3, :] = 0.0
    token_mask[3, 2:5] = 1.0
    if kl_extremes:
        token_mask[0, 1] = token_mask[1, 2] = 1.0
    sample_mask = torch.tensor([1.0, 1.0, 1.0, 1.0], dtype=torch.float64)
    return dict(curr=curr, prev=prev, gen=gen, ref=ref, advantages=adv, token_mask=token_mask,
                sample_mask=sample_mask)


def clipped_pg(x, o, g_tok, g_seq):
    curr = x["curr"].clone().requires_grad_(True)
    prev, gen, ref, adv = x["prev"], x["gen"], x["ref"], x["advantages"]
    tm, sm = x["token_mask"], x["sample_mask"]
    m = tm * sm[:, None]
    n_row = tm.sum(1)
    safe_n = torch.where(n_row > 0, n_row, torch.ones_like(n_row))

    def row_mean(v):  # sum over the row's tokens / its token count (0 for an empty row)
        return (v * tm).sum(1) / safe_n

    if o["sequence_level_importance_ratios"]:
        r = torch.exp(row_mean(curr - prev))[:, None].expand(B, T)
    else:
        r = torch.exp(curr - prev)
    rc = r.clamp(1.0 - o["ratio_clip_min"], 1.0 + o["ratio_clip_max"])
    pg = torch.maximum(-adv * r, -adv * rc)
    if o["ratio_clip_c"] is not None:
        pg = torch.where(adv < 0, torch.minimum(pg, -adv * o["ratio_clip_c"]), pg)
    if o["use_importance_sampling_correction"]:
        if o["sequence_level_importance_ratios"]:
            w = nan_to_zero(torch.exp(((prev - gen) * m).sum(1)))[:, None].expand(B, T)
        else:
            w = nan_to_zero(torch.exp(prev - gen))
        if o["truncated_importance_sampling_ratio"] is not None:
            w = w.clamp(max=o["truncated_importance_sampling_ratio"])
    else:
        w = torch.ones_like(prev)
    beta = o["reference_policy_kl_penalty"]
    if beta != 0:
        v = nan_to_zero(torch.exp(curr - gen)).detach() if o["use_on_policy_kl_approximation"] else torch.ones_like(curr)
        d = (ref - curr).clamp(-20.0, 20.0)
        kl_tok = beta * v * (torch.exp(d) - d - 1)
    else:
        kl_tok = torch.zeros_like(curr)

    def reduce(v):
        if o["token_level_loss"]:
            return (v * m).sum() / g_tok
        return (sm * row_mean(v)).sum() / g_seq

    actor = reduce(w * pg)
    kl = reduce(kl_tok)
    loss = actor + kl
    loss.backward()
    with torch.no_grad():
        metrics = {
            "loss": float(loss),
            "probs_ratio": float((r * m).sum() / g_tok),
            "probs_ratio_clamped": float((rc * m).sum() / g_tok),
            "kl_penalty": float(kl / beta) if beta != 0 else 0.0,
            "token_mult_prob_error": float((torch.exp((gen - prev).abs() * m) * m).sum() / g_tok),
            "approx_entropy": float(-(torch.exp(curr - gen) * curr * m).sum() / g_tok),
            "num_valid_samples": float(sm.sum()),
        }
    return metrics, curr.grad


PG_BASE = dict(reference_policy_kl_penalty=0.05, ratio_clip_min=0.2, ratio_clip_max=0.28, ratio_clip_c=None,
               use_on_policy_kl_approximation=False, use_importance_sampling_correction=False,
               truncated_importance_sampling_ratio=None, sequence_level_importance_ratios=False,
               token_level_loss=True)

PG_CASES = [
    # name, option changes, input changes
    ("clip_both_sides", {}, {}),
    ("dual_clip", {"ratio_clip_c": 3.0}, {"spread": 1.6}),
    ("kl_off", {"reference_policy_kl_penalty": 0.0}, {}),
    ("kl_clamped_at_20", {"reference_policy_kl_penalty": 1e-9}, {"kl_extremes": True}),
    ("on_policy_kl", {"use_on_policy_kl_approximation": True}, {}),
    ("is_token_level", {"use_importance_sampling_correction": True}, {}),
    ("is_token_level_truncated", {"use_importance_sampling_correction": True,
                                  "truncated_importance_sampling_ratio": 1.05}, {}),
    ("sequence_level_loss", {"token_level_loss": False}, {}),
    ("is_sequence_level_truncated", {"use_importance_sampling_correction": True, "token_level_loss": False,
                                     "sequence_level_importance_ratios": True,
                                     "truncated_importance_sampling_ratio": 1.2}, {}),
    ("gspo_dual_clip_on_policy_kl", {"use_importance_sampling_correction": True, "token_level_loss": False,
                                     "sequence_level_importance_ratios": True, "ratio_clip_c": 2.5,
                                     "use_on_policy_kl_approximation": True}, {"spread": 1.2}),
    ("masked_samples", {"use_importance_sampling_correction": True}, {"sample_mask": [1.0, 0.0, 1.0, 0.0]}),
    ("masked_samples_sequence_level", {"token_level_loss": False}, {"sample_mask": [0.0, 1.0, 1.0, 1.0]}),
]


def dpo_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    rows = 6  # 3 pairs: chosen, rejected, ...
    curr = f32(-3.0 * torch.rand(rows, T, generator=g, dtype=torch.float64) - 0.05)
    ref = f32(curr + 0.8 * (2 * torch.rand(rows, T, generator=g, dtype=torch.float64) - 1))
    token_mask = (torch.rand(rows, T, generator=g) > 0.3).to(torch.float64)
    token_mask[:, 0] = 1.0
    sample_mask = torch.ones(rows, dtype=torch.float64)
    return dict(curr=curr, ref=ref, token_mask=token_mask, sample_mask=sample_mask)


def dpo(x, o, g_seq):
    curr = x["curr"].clone().requires_grad_(True)
    ref, tm, sm = x["ref"], x["token_mask"], x["sample_mask"]
    rewards = ((curr - ref) * tm).sum(1)
    if o["preference_average_log_probs"]:
        rewards = rewards / tm.sum(1).clamp(min=1)
    rc, rr = rewards[0::2], rewards[1::2]
    pairs = g_seq / 2
    beta = o["reference_policy_kl_penalty"]
    preference = (-torch.nn.functional.logsigmoid(beta * (rc - rr)) * sm[0::2]).sum() / pairs
    m = tm * sm[:, None]
    nll = -(curr * m).sum(1)
    if o["sft_average_log_probs"]:
        nll = nll / m.sum(1).clamp(min=1)
    # As NeMo RL: the SFT term (and its metric) only with a positive weight.
    sft = (nll[0::2] * sm[0::2]).sum() / pairs if o["sft_loss_weight"] > 0 else torch.zeros((), dtype=torch.float64)
    loss = o["sft_loss_weight"] * sft + o["preference_loss_weight"] * preference
    loss.backward()
    with torch.no_grad():
        chosen = float((rc * sm[0::2]).sum() / pairs)
        rejected = float((rr * sm[1::2]).sum() / pairs)
        metrics = {
            "loss": float(loss),
            "sft_loss": float(sft),
            "preference_loss": float(preference),
            "accuracy": float(((rc > rr).to(torch.float64) * sm[0::2]).sum() / pairs),
            "rewards_chosen_mean": chosen,
            "rewards_rejected_mean": rejected,
            "reward_margin": chosen - rejected,
            "num_valid_samples": float(sm.sum() / 2),
        }
    return metrics, curr.grad


DPO_BASE = dict(reference_policy_kl_penalty=0.1, preference_loss_weight=1.0, sft_loss_weight=0.0,
                preference_average_log_probs=False, sft_average_log_probs=False)

DPO_CASES = [
    ("preference_only", {}, {}),
    ("average_log_probs_with_sft", {"preference_average_log_probs": True, "sft_average_log_probs": True,
                                    "sft_loss_weight": 0.5, "reference_policy_kl_penalty": 0.5}, {}),
    ("sft_summed_weighted", {"sft_loss_weight": 0.25, "preference_loss_weight": 2.0}, {}),
    ("masked_pair", {"sft_loss_weight": 0.5}, {"sample_mask": [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]}),
]


def tensor_json(t):
    return t.tolist()


def build():
    out = {"clipped_pg": [], "dpo": []}
    for i, (name, changes, input_changes) in enumerate(PG_CASES):
        o = dict(PG_BASE, **changes)
        x = pg_inputs(4000 + i, input_changes.get("spread", 0.6), input_changes.get("kl_extremes", False))
        if "sample_mask" in input_changes:
            x["sample_mask"] = torch.tensor(input_changes["sample_mask"], dtype=torch.float64)
        m = x["token_mask"] * x["sample_mask"][:, None]
        g_tok, g_seq = float(m.sum()) + 9.0, float(x["sample_mask"].sum()) + 2.0  # other ranks' rows too
        metrics, grad = clipped_pg(x, o, g_tok, g_seq)
        assert all(math.isfinite(v) for v in metrics.values()), name
        out["clipped_pg"].append({
            "name": name, "options": o, "global_valid_tokens": g_tok, "global_valid_sequences": g_seq,
            "inputs": {k: tensor_json(v) for k, v in x.items()},
            "metrics": metrics, "grad_curr": tensor_json(grad)})
    for i, (name, changes, input_changes) in enumerate(DPO_CASES):
        o = dict(DPO_BASE, **changes)
        x = dpo_inputs(5000 + i)
        if "sample_mask" in input_changes:
            x["sample_mask"] = torch.tensor(input_changes["sample_mask"], dtype=torch.float64)
        g_seq = float(x["sample_mask"].sum()) + 4.0
        metrics, grad = dpo(x, o, g_seq)
        out["dpo"].append({
            "name": name, "options": o, "global_valid_sequences": g_seq,
            "inputs": {k: tensor_json(v) for k, v in x.items()},
            "metrics": metrics, "grad_curr": tensor_json(grad)})
    return out


def self_checks(golden):
    """Each branch does something: the cases that toggle one option differ."""
    pg = {c["name"]: c for c in golden["clipped_pg"]}
    base = pg["clip_both_sides"]
    x = {k: torch.tensor(v, dtype=torch.float64) for k, v in base["inputs"].items()}
    r = torch.exp(x["curr"] - x["prev"])
    m = x["token_mask"] * x["sample_mask"][:, None]
    lo, hi = 1 - base["options"]["ratio_clip_min"], 1 + base["options"]["ratio_clip_max"]
    assert bool(((r < lo) * m).any()) and bool(((r > hi) * m).any()), "clipping on both sides is exercised"
    dual = pg["dual_clip"]
    xd = {k: torch.tensor(v, dtype=torch.float64) for k, v in dual["inputs"].items()}
    rd = torch.exp(xd["curr"] - xd["prev"])
    md = xd["token_mask"] * xd["sample_mask"][:, None]
    assert bool(((rd > dual["options"]["ratio_clip_c"]) * (xd["advantages"] < 0) * md).any()), "dual clip bites"
    for name in ["kl_off", "on_policy_kl", "is_token_level", "is_token_level_truncated", "sequence_level_loss"]:
        assert abs(pg[name]["metrics"]["loss"] - base["metrics"]["loss"]) > 1e-6, name
    assert abs(pg["is_token_level_truncated"]["metrics"]["loss"] - pg["is_token_level"]["metrics"]["loss"]) > 1e-6
    assert pg["kl_off"]["metrics"]["kl_penalty"] == 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="recompute and compare with the file on disk")
    args = ap.parse_args()
    torch.set_num_threads(1)
    golden = build()
    self_checks(golden)
    text = json.dumps(golden, indent=1) + "\n"
    if args.check:
        bad = json_close(json.load(open(OUT)), json.loads(text))
        if bad:
            print(f"{OUT} differs at {bad}")
            sys.exit(1)
        print("policy_losses.json matches")
        return
    with open(OUT, "w") as f:
        f.write(text)
    print(f"wrote {OUT}: {len(golden['clipped_pg'])} clipped-pg cases, {len(golden['dpo'])} dpo cases")


if __name__ == "__main__":
    main()
