#!/usr/bin/env python3
"""Golden data for the mixture-of-experts families, computed by Hugging Face
transformers itself (unlike generate.py, whose reference is our own
reference.py): Qwen3MoeForCausalLM and MixtralForCausalLM, tiny and random,
run in float64 on the CPU.

Per case, tests/golden/<case>/:
    config.json        the HF config (save_pretrained's keys, MoE fields included)
    model.safetensors  F32 weights, HF names (per-expert tensors)
    golden.json        tokens, labels, logits, CE loss, aux loss, total loss,
                       gradient norms/samples of the total loss, the experts
                       that got no token, and a masked aux loss

Run with a Python that has torch 2.x and transformers 4.51..4.x (per-expert
checkpoint layout; transformers 5 fuses the experts):
    python3 tests/golden/generate_moe.py            # rewrite the MoE cases
    python3 tests/golden/generate_moe.py --check    # recompute, compare with disk
"""

import argparse
import json
import os
import sys

import torch
import transformers
from transformers import MixtralConfig, MixtralForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM
from transformers.models.qwen3_moe.modeling_qwen3_moe import load_balancing_loss_func

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from generate import fmt_json, safetensors_bytes, safetensors_parse, write_or_check  # noqa: E402

BATCH, SEQ = 2, 12
IGNORE_INDEX = -100
EXTRA_IGNORED = [(0, 3), (1, 7)]  # as generate.py: aligned-label positions without a target
PADDED_TAIL = 4                   # the masked aux loss treats row 1's last 4 tokens as padding
ROUTER_SCALE = 4.0                # peaky routing, so some experts get no token
# Cases whose routing must leave an expert without tokens (asserted).
MUST_LEAVE_EXPERTS_UNUSED = {"qwen3_moe", "mixtral"}

COMMON = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6,
              hidden_act="silu", tie_word_embeddings=False, max_position_embeddings=256,
              torch_dtype="float32", output_router_logits=True)

CASES = {
    # 3 layers, the middle one dense (mlp_only_layers); top-2 of 8, not renormalised.
    "qwen3_moe": (Qwen3MoeConfig, Qwen3MoeForCausalLM, dict(
        COMMON, architectures=["Qwen3MoeForCausalLM"], vocab_size=96, head_dim=16, intermediate_size=64,
        moe_intermediate_size=24, num_hidden_layers=3, num_experts=8, num_experts_per_tok=2,
        decoder_sparse_step=1, mlp_only_layers=[1], norm_topk_prob=False, rope_theta=1000000.0,
        router_aux_loss_coef=0.01, use_sliding_window=False, sliding_window=None, attention_bias=False)),
    # decoder_sparse_step 2: layers 1 and 3 sparse; top-3 of 8 renormalised.
    "qwen3_moe_sparse_step": (Qwen3MoeConfig, Qwen3MoeForCausalLM, dict(
        COMMON, architectures=["Qwen3MoeForCausalLM"], vocab_size=88, head_dim=16, intermediate_size=56,
        moe_intermediate_size=20, num_hidden_layers=4, num_experts=8, num_experts_per_tok=3,
        decoder_sparse_step=2, mlp_only_layers=[], norm_topk_prob=True, rope_theta=10000.0,
        router_aux_loss_coef=0.05, use_sliding_window=False, sliding_window=None, attention_bias=False)),
    # Every layer sparse, top-2 of 8 always renormalised, no window.
    "mixtral": (MixtralConfig, MixtralForCausalLM, dict(
        COMMON, architectures=["MixtralForCausalLM"], vocab_size=90, intermediate_size=40,
        num_hidden_layers=2, num_local_experts=8, num_experts_per_tok=2, rope_theta=1000000.0,
        sliding_window=None, router_aux_loss_coef=0.02, router_jitter_noise=0.0)),
    # Mixtral with a sliding window of 5 over a sequence of 12.
    "mixtral_window": (MixtralConfig, MixtralForCausalLM, dict(
        COMMON, architectures=["MixtralForCausalLM"], vocab_size=90, intermediate_size=40,
        num_hidden_layers=2, num_local_experts=4, num_experts_per_tok=2, rope_theta=10000.0,
        sliding_window=5, router_aux_loss_coef=0.02, router_jitter_noise=0.0)),
}


def init_weights(model, gen):
    """The scales of generate.py (activations and logits O(1)); router rows
    ROUTER_SCALE times larger. Drawn in float32 in named_parameters order."""
    w = {}
    hidden = model.config.hidden_size
    for name, p in model.named_parameters():
        if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            t = 1.0 + 0.1 * torch.randn(p.shape, generator=gen)
        elif name.endswith("embed_tokens.weight") or name == "lm_head.weight":
            t = torch.randn(p.shape, generator=gen) / hidden ** 0.5
        else:
            t = torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5
            if name.endswith("mlp.gate.weight") or name.endswith("block_sparse_moe.gate.weight"):
                t = t * ROUTER_SCALE
        w[name] = t.to(torch.float32).contiguous()
    return w


def make_batch(vocab, gen):
    tokens = torch.randint(0, vocab, (BATCH, SEQ), generator=gen)
    labels = torch.full_like(tokens, IGNORE_INDEX)
    labels[:, :-1] = tokens[:, 1:]  # aligned with the logits (no further shift)
    for b, t in EXTRA_IGNORED:
        labels[b, t] = IGNORE_INDEX
    return tokens, labels


def unused_experts(model, router_logits):
    """{router module path: experts no token chose}, from HF's own routing rule."""
    k = model.config.num_experts_per_tok
    n_exp = router_logits[0].shape[-1]
    paths = [n[: -len(".weight")] for n, _ in model.named_parameters()
             if n.endswith("mlp.gate.weight") or n.endswith("block_sparse_moe.gate.weight")]
    assert len(paths) == len(router_logits), (paths, len(router_logits))
    out = {}
    for path, logits in zip(paths, router_logits):
        chosen = torch.topk(torch.softmax(logits.float(), -1), k, -1).indices.flatten()
        counts = torch.bincount(chosen, minlength=n_exp)
        out[path] = [e for e in range(n_exp) if counts[e] == 0]
    return out


def build_case(idx, name, config_cls, model_cls, cfg):
    gen = torch.Generator().manual_seed(2000 + idx)
    config = config_cls(**cfg)
    config._attn_implementation = "eager"
    model = model_cls(config).to(torch.float64)
    model.train()  # routing is deterministic in both modes (no jitter, no dropout)
    w32 = init_weights(model, gen)
    tokens, labels = make_batch(config.vocab_size, gen)

    st = safetensors_bytes(w32)
    w_back, _ = safetensors_parse(st)
    assert set(w_back) == set(w32) and all(torch.equal(w_back[k], w32[k]) for k in w32)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(w_back[n].to(torch.float64))

    # HF's labels are unshifted: hf_labels[t + 1] is the target of logits[t].
    hf_labels = tokens.clone()
    hf_labels[:, 0] = IGNORE_INDEX
    hf_labels[:, 1:] = labels[:, :-1]
    out = model(input_ids=tokens, labels=hf_labels, output_router_logits=True)
    logits = out.logits
    assert logits.dtype == torch.float64
    # HF's own loss runs the cross-entropy on logits.float() (float32); the
    # golden CE is the float64 one on the same logits, and HF's aux loss is
    # already float64.
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                           ignore_index=IGNORE_INDEX, reduction="mean")
    aux = out.aux_loss
    assert aux.dtype == torch.float64
    coef = config.router_aux_loss_coef
    total = ce + coef * aux
    assert abs(out.loss.item() - total.item()) < 1e-5, (out.loss.item(), total.item())
    total.backward()
    grads = {n: (p.grad if p.grad is not None else torch.zeros_like(p)).detach() for n, p in model.named_parameters()}

    unused = unused_experts(model, out.router_logits)
    if name in MUST_LEAVE_EXPERTS_UNUSED:
        assert any(unused.values()), f"{name}: every expert got a token; raise ROUTER_SCALE"
    for path, experts in unused.items():
        for e in experts:
            for n in grads:
                if n.startswith(f"{path[: -len('.gate')]}.experts.{e}."):
                    assert model.get_parameter(n).grad is None, n

    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, SEQ - PADDED_TAIL:] = 0
    with torch.no_grad():
        n_exp = config.num_local_experts if isinstance(config, MixtralConfig) else config.num_experts
        aux_masked = load_balancing_loss_func(tuple(l.detach() for l in out.router_logits), n_exp,
                                              config.num_experts_per_tok, mask)
    golden = {
        "case": name,
        "generator": f"transformers {transformers.__version__}, torch {torch.__version__}, float64 CPU, eager attention",
        "tokens": tokens.tolist(),
        "labels": labels.tolist(),
        "ignore_index": IGNORE_INDEX,
        "num_valid_labels": int((labels != IGNORE_INDEX).sum()),
        "loss": ce.item(),
        "aux_loss": aux.item(),
        "router_aux_loss_coef": coef,
        "total_loss": total.item(),
        "loss_note": ("loss: float64 cross-entropy, mean over the non-ignored aligned labels; aux_loss: HF's "
                      "load_balancing_loss_func over the router logits of all MoE layers (no mask); total_loss = "
                      "loss + router_aux_loss_coef * aux_loss, the value HF's forward returns as loss (HF itself "
                      "runs the CE in float32). grad_norms / grad_samples are of total_loss."),
        "attention_mask": mask.tolist(),
        "aux_loss_masked": aux_masked.item(),
        "experts_without_tokens": unused,
        "grad_norms": {k: grads[k].norm().item() for k in sorted(grads)},
        "grad_samples": {k: grads[k].flatten()[:4].tolist() for k in sorted(grads)},
        "logits": logits.detach().tolist(),
    }
    # What save_pretrained writes (the keys that differ from the defaults),
    # plus every key this case sets, so the MoE fields are always spelled out.
    config_json = config.to_diff_dict()
    config_json.update({k: v for k, v in cfg.items() if k != "torch_dtype"})
    config_json.pop("dtype", None)
    config_json["torch_dtype"] = "float32"
    files = {
        "config.json": (json.dumps(config_json, indent=2, sort_keys=True) + "\n").encode(),
        "model.safetensors": st,
        "golden.json": fmt_json(golden).encode(),
    }
    return files, golden


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    args = ap.parse_args()
    torch.set_num_threads(1)
    mismatched = []
    for idx, (name, (config_cls, model_cls, cfg)) in enumerate(CASES.items()):
        files, golden = build_case(idx, name, config_cls, model_cls, cfg)
        sizes = write_or_check(os.path.join(HERE, name), files, args.check, mismatched)
        unused = {k: v for k, v in golden["experts_without_tokens"].items() if v}
        print(f"{name:22s} loss {golden['loss']:.6f} aux {golden['aux_loss']:.6f} "
              f"masked aux {golden['aux_loss_masked']:.6f} unused {unused} ({sizes})")
    if args.check:
        if mismatched:
            print("MISMATCH:\n  " + "\n  ".join(mismatched))
            return 1
        print("all MoE golden files match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
