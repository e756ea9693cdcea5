#!/usr/bin/python3
"""Write the golden files tessel's model tests compare against.

    /usr/bin/python3 tests/golden/generate.py            # rewrite every case
    /usr/bin/python3 tests/golden/generate.py --check    # regenerate in memory, compare with disk

For each case in CASES this writes tests/golden/<case>/
    config.json        HF-style config (the C++ side builds the model from it)
    model.safetensors  random F32 weights under HF parameter names
    golden.json        tokens, labels, float64 logits, loss, gradient norms

The model math lives in reference.py (float64). See README.md for the exact
conventions. Everything is deterministic: each case seeds its own generator.
"""

import argparse
import copy
import json
import math
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference as ref  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, SEQ = 2, 12
# Extra ignored label positions (besides the last position of every row).
EXTRA_IGNORED = [(0, 3), (1, 7)]

# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

def _common(**kw):
    base = {
        "attention_dropout": 0.0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "initializer_range": 0.02,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 88,
        "max_position_embeddings": 256,
        "torch_dtype": "float32",
        "use_cache": True,
    }
    base.update(kw)
    return dict(sorted(base.items()))


CASES = {
    # Plain Llama: head_dim derived (32 / 4 = 8), untied, vocab a power of two.
    "llama": _common(
        architectures=["LlamaForCausalLM"], model_type="llama",
        hidden_size=32, vocab_size=128, rms_norm_eps=1e-5, rope_theta=10000.0,
        rope_scaling=None, attention_bias=False, mlp_bias=False, pretraining_tp=1,
        tie_word_embeddings=False),
    # Llama 3 rope scaling. original_max_position_embeddings is shrunk to 64 so
    # that, with head_dim 16 and theta 5e5, the 8 frequencies fall in all three
    # bands (1 kept, 1 blended, 6 divided by factor) and matter at seq 12.
    # Also an explicit head_dim (16) != hidden/heads (8), as Llama-3.2 configs allow.
    "llama3_rope_scaling": _common(
        architectures=["LlamaForCausalLM"], model_type="llama",
        hidden_size=32, head_dim=16, vocab_size=100, rms_norm_eps=1e-5,
        rope_theta=500000.0, max_position_embeddings=512,
        rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 64, "rope_type": "llama3"},
        attention_bias=False, mlp_bias=False, pretraining_tp=1,
        tie_word_embeddings=False),
    # Llama with tied embeddings: no lm_head.weight in the checkpoint.
    "llama_tied": _common(
        architectures=["LlamaForCausalLM"], model_type="llama",
        hidden_size=32, vocab_size=96, rms_norm_eps=1e-6, rope_theta=10000.0,
        rope_scaling=None, attention_bias=False, mlp_bias=False, pretraining_tp=1,
        tie_word_embeddings=True),
    # Mistral with a window (4) much shorter than the sequence (12).
    "mistral": _common(
        architectures=["MistralForCausalLM"], model_type="mistral",
        hidden_size=32, vocab_size=112, rms_norm_eps=1e-5, rope_theta=10000.0,
        sliding_window=4, tie_word_embeddings=False),
    # Qwen2: q/k/v biases (no config field), tied like Qwen2.5-0.5B.
    # sliding_window is set but use_sliding_window is false, exactly like the
    # real config: HF then ignores the window, so every layer is full causal.
    "qwen2": _common(
        architectures=["Qwen2ForCausalLM"], model_type="qwen2",
        hidden_size=32, vocab_size=97, rms_norm_eps=1e-6, rope_theta=1000000.0,
        use_sliding_window=False, sliding_window=4, max_window_layers=1,
        tie_word_embeddings=True),
    # Qwen3: explicit head_dim 16 != hidden/heads = 8, per-head q_norm/k_norm.
    "qwen3": _common(
        architectures=["Qwen3ForCausalLM"], model_type="qwen3",
        hidden_size=32, head_dim=16, vocab_size=120, rms_norm_eps=1e-6,
        rope_theta=1000000.0, rope_scaling=None, attention_bias=False,
        use_sliding_window=False, sliding_window=None, max_window_layers=2,
        tie_word_embeddings=False),
    # Gemma3 text: 3 layers, local, local, global (explicit layer_types and the
    # matching sliding_window_pattern 3: layer i global iff (i+1) % 3 == 0).
    "gemma3": _common(
        architectures=["Gemma3ForCausalLM"], model_type="gemma3_text",
        hidden_size=32, head_dim=16, num_hidden_layers=3, vocab_size=101,
        query_pre_attn_scalar=24, rms_norm_eps=1e-6,
        rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling=None,
        sliding_window=5, sliding_window_pattern=3,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        hidden_activation="gelu_pytorch_tanh", hidden_act=None,
        attention_bias=False, attn_logit_softcapping=None,
        final_logit_softcapping=None, pad_token_id=0, bos_token_id=2, eos_token_id=1,
        tie_word_embeddings=True),
    # Gemma3 with a final logit softcap small enough to matter (2.0), and the
    # older config style: no layer_types, only sliding_window_pattern 2, so
    # layers 0 and 2 are local and layer 1 is global (last layer local).
    "gemma3_softcap": _common(
        architectures=["Gemma3ForCausalLM"], model_type="gemma3_text",
        hidden_size=32, head_dim=16, num_hidden_layers=3, vocab_size=101,
        query_pre_attn_scalar=24, rms_norm_eps=1e-6,
        rope_theta=1000000.0, rope_local_base_freq=10000.0, rope_scaling=None,
        sliding_window=5, sliding_window_pattern=2,
        hidden_activation="gelu_pytorch_tanh", hidden_act=None,
        attention_bias=False, attn_logit_softcapping=None,
        final_logit_softcapping=2.0, pad_token_id=0, bos_token_id=2, eos_token_id=1,
        tie_word_embeddings=True),
}
for _c in CASES.values():   # Gemma configs carry hidden_activation, not hidden_act
    if _c.get("hidden_act", "x") is None:
        del _c["hidden_act"]

# Wrong variants each case must reject (see reference.Wrong).
COMMON_WRONG = ["rope_interleaved", "kv_head_tiled"]
CASE_WRONG = {
    "llama": [],
    "llama3_rope_scaling": ["no_rope_scaling"],
    "llama_tied": [],
    "mistral": ["no_window", "window_off_by_one"],
    "qwen2": ["no_qkv_bias", "window_everywhere"],
    "qwen3": ["no_qk_norm"],
    "gemma3": ["plain_norm_w", "no_embed_scale", "head_dim_scale", "no_qk_norm",
               "no_sandwich", "exact_gelu", "no_window", "window_off_by_one",
               "window_everywhere", "swap_gemma_rope_bases"],
    "gemma3_softcap": ["no_softcap", "no_window", "window_everywhere",
                       "swap_gemma_rope_bases", "plain_norm_w"],
}

# Smallest logit change a mistake must cause. tanh vs erf GELU differ by at
# most ~5e-4 per activation, so that one mistake is only ~1e-3 visible.
MIN_DELTA = {"exact_gelu": 5e-4}

# ---------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------

def init_weights(a: ref.Arch, gen: torch.Generator):
    """Random F32 weights. Matrices use std 1/sqrt(fan_in) (not 0.02) so that
    activations, attention scores and logits are O(1): with 0.02 the attention
    is nearly uniform and RoPE/mask mistakes hide under fp32 noise."""
    out = {}
    for name, shape in ref.param_shapes(a).items():
        if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            w = 0.1 * torch.randn(shape, generator=gen)
            if not a.gemma_norm:
                w = w + 1.0                 # plain RMSNorm: around the identity 1
        elif name.endswith(".bias"):
            w = 0.1 * torch.randn(shape, generator=gen)
        elif name == "model.embed_tokens.weight" or name == "lm_head.weight":
            w = torch.randn(shape, generator=gen) / math.sqrt(a.hidden)
        else:
            w = torch.randn(shape, generator=gen) / math.sqrt(shape[1])
        out[name] = w.to(torch.float32).contiguous()
    return out


# ---------------------------------------------------------------------------
# safetensors (written by hand: no safetensors package here)
# ---------------------------------------------------------------------------

def safetensors_bytes(tensors):
    """8-byte LE header length N, N bytes of JSON (space-padded to a multiple
    of 8), then the raw little-endian data. Tensors in name order, packed."""
    header = {"__metadata__": {"format": "pt"}}
    blobs, off = [], 0
    for name in sorted(tensors):
        t = tensors[name]
        assert t.dtype == torch.float32 and t.is_contiguous()
        data = t.numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((-len(hj)) % 8)
    return struct.pack("<Q", len(hj)) + hj + b"".join(blobs)


def safetensors_parse(buf):
    import numpy as np
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    data = buf[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32"
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[b:e], dtype="<f4").reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out, header


# ---------------------------------------------------------------------------
# Golden computation
# ---------------------------------------------------------------------------

def make_batch(vocab, gen):
    tokens = torch.randint(0, vocab, (BATCH, SEQ), generator=gen)
    labels = torch.full_like(tokens, ref.IGNORE_INDEX)
    labels[:, :-1] = tokens[:, 1:]              # next-token targets, pre-shifted
    for b, t in EXTRA_IGNORED:
        labels[b, t] = ref.IGNORE_INDEX
    return tokens, labels


def run_reference(weights32, a, tokens, labels, dtype=torch.float64):
    params = {k: v.to(dtype).requires_grad_(True) for k, v in weights32.items()}
    logits = ref.forward(params, a, tokens)
    logits.retain_grad()
    loss = ref.loss_fn(logits, labels)
    loss.backward()
    grads = {k: v.grad.detach() for k, v in params.items()}
    return logits.detach(), loss.detach(), grads, logits.grad.detach()


def self_checks(name, cfg, a, w32, tokens, labels, logits, loss, grads, dlogits):
    """Asserts; returns a dict of measured numbers for the README/report."""
    info = {}
    ignored = labels == ref.IGNORE_INDEX
    # 1. Ignored positions contribute nothing: zero d loss / d logits rows,
    #    and the loss equals an explicit loop over the kept positions.
    assert dlogits[ignored].abs().max().item() == 0.0
    assert dlogits[~ignored].abs().max().item() > 0.0
    lp = torch.log_softmax(logits, -1)
    terms = [-lp[b, t, labels[b, t]].item() for b in range(BATCH) for t in range(SEQ)
             if labels[b, t] != ref.IGNORE_INDEX]
    assert abs(sum(terms) / len(terms) - loss.item()) < 1e-12
    assert len(terms) == BATCH * (SEQ - 1) - len(EXTRA_IGNORED)
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, a.vocab), labels.reshape(-1),
                                           ignore_index=ref.IGNORE_INDEX)
    assert abs(ce.item() - loss.item()) < 1e-12
    if a.act == "gelu_pytorch_tanh":
        x = torch.linspace(-6, 6, 1001, dtype=torch.float64)
        assert torch.allclose(ref.gelu_tanh(x), torch.nn.functional.gelu(x, approximate="tanh"),
                              rtol=0, atol=1e-14)

    # 2. Causality: changing the last token leaves earlier logits unchanged.
    t2 = tokens.clone()
    t2[:, -1] = (t2[:, -1] + 1) % a.vocab
    p64 = {k: v.double() for k, v in w32.items()}
    with torch.no_grad():
        l2 = ref.forward(p64, a, t2)
    assert torch.equal(l2[:, :-1], logits[:, :-1])

    # 3. Tied embeddings: the tied gradient is the sum of the input-side and
    #    output-side gradients (checked by untying into two copies).
    if a.tied:
        emb = w32["model.embed_tokens.weight"].double()
        e_in = emb.clone().requires_grad_(True)
        e_out = emb.clone().requires_grad_(True)
        p = {k: v.double() for k, v in w32.items()}
        p["model.embed_tokens.weight"] = e_in
        p["lm_head.weight"] = e_out
        a_untied = copy.copy(a)
        a_untied.tied = False
        ref.loss_fn(ref.forward(p, a_untied, tokens), labels).backward()
        g = grads["model.embed_tokens.weight"]
        assert torch.allclose(g, e_in.grad + e_out.grad, rtol=1e-12, atol=1e-15)
        assert e_in.grad.norm() > 0 and e_out.grad.norm() > 0
        info["tied_embed_grad_norm_in_out"] = [e_in.grad.norm().item(), e_out.grad.norm().item()]
        # rows of tokens never used as input only get output-side gradient
        unused = sorted(set(range(a.vocab)) - set(tokens.flatten().tolist()))
        assert e_in.grad[unused].abs().max().item() == 0.0

    # 4. fp32 noise: same math in float32, to size the tolerances.
    l32, loss32, g32, _ = run_reference(w32, a, tokens, labels, torch.float32)
    info["fp32_max_abs_logit_err"] = (l32.double() - logits).abs().max().item()
    info["fp32_abs_loss_err"] = abs(loss32.item() - loss.item())
    info["fp32_max_rel_grad_norm_err"] = max(
        abs(g32[k].double().norm().item() - grads[k].norm().item()) / grads[k].norm().item()
        for k in grads)

    # 5. Sensitivity: each listed mistake moves the logits far above fp32 noise.
    sens = {}
    for flag in COMMON_WRONG + CASE_WRONG[name]:
        with torch.no_grad():
            lw = ref.forward(p64, a, tokens, ref.Wrong(**{flag: True}))
        d = (lw - logits).abs().max().item()
        sens[flag] = d
        floor = MIN_DELTA.get(flag, 1e-2)
        assert d > floor, f"{name}: mistake {flag} only moves logits by {d:.2e}"
        assert d > 100 * info["fp32_max_abs_logit_err"], (name, flag, d)
    info["wrong_variant_max_abs_logit_delta"] = sens
    return info


def fmt_json(obj):
    """Top-level keys one per line; values compact. Floats use Python's repr
    (shortest string that round-trips the float64 exactly)."""
    lines = [f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in obj.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def build_case(idx, name, cfg):
    gen = torch.Generator().manual_seed(1000 + idx)
    a = ref.arch_from_config(cfg)
    w32 = init_weights(a, gen)
    tokens, labels = make_batch(a.vocab, gen)

    st = safetensors_bytes(w32)
    w_back, header = safetensors_parse(st)            # round trip through the bytes
    assert set(w_back) == set(w32) and all(torch.equal(w_back[k], w32[k]) for k in w32)
    assert (a.tied) == ("lm_head.weight" not in w_back)

    logits, loss, grads, dlogits = run_reference(w_back, a, tokens, labels)
    info = self_checks(name, cfg, a, w_back, tokens, labels, logits, loss, grads, dlogits)

    n_valid = int((labels != ref.IGNORE_INDEX).sum())
    golden = {
        "case": name,
        "tokens": tokens.tolist(),
        "labels": labels.tolist(),
        "ignore_index": ref.IGNORE_INDEX,
        "num_valid_labels": n_valid,
        "loss": loss.item(),
        "loss_reduction": "mean over all non-ignored positions of the batch (sum / num_valid_labels)",
        "grad_norms": {k: grads[k].norm().item() for k in sorted(grads)},
        "grad_samples": {k: grads[k].flatten()[:4].tolist() for k in sorted(grads)},
        "tolerance_note": (
            "Reference computed in float64 from the stored F32 weights. The same math in "
            f"float32 differs by max |logit| {info['fp32_max_abs_logit_err']:.1e}, |loss| "
            f"{info['fp32_abs_loss_err']:.1e}, grad-norm rel {info['fp32_max_rel_grad_norm_err']:.1e}. "
            "Suggested fp32 checks: logits atol 1e-4, loss atol 1e-5, grad norms rtol 1e-4 "
            "(grad_samples atol 1e-5 + rtol 1e-4). Wrong conventions move logits by > 1e-2."),
        "logits": logits.tolist(),
    }
    files = {
        "config.json": (json.dumps(cfg, indent=2) + "\n").encode(),
        "model.safetensors": st,
        "golden.json": fmt_json(golden).encode(),
    }
    return files, info


# float64 values recomputed on another CPU (another BLAS kernel: AVX2 vs
# AVX-512) differ in the last bits; --check accepts that much in golden.json.
CHECK_REL_TOL = 1e-11


def json_close(a, b, path=""):
    """None when a and b agree (numbers within CHECK_REL_TOL, relative to the
    larger magnitude or 1), else the first path where they do not."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return path + " (keys)"
        for k in a:
            bad = json_close(a[k], b[k], f"{path}.{k}")
            if bad:
                return bad
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return path + " (length)"
        for i, (x, y) in enumerate(zip(a, b)):
            bad = json_close(x, y, f"{path}[{i}]")
            if bad:
                return bad
        return None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return None if abs(a - b) <= CHECK_REL_TOL * max(1.0, abs(a), abs(b)) else path
    if isinstance(a, str) and isinstance(b, str) and path.endswith("tolerance_note"):
        return None  # prose quoting this machine's fp32 self-check figures
    return None if a == b else path


def write_or_check(case_dir, files, check, mismatched):
    """Writes the case's files, or (check) appends to `mismatched` the paths
    that differ on disk: config.json and model.safetensors byte for byte,
    golden.json value by value within CHECK_REL_TOL. Returns the sizes as text."""
    for fname, data in files.items():
        path = os.path.join(case_dir, fname)
        if check:
            if not os.path.exists(path):
                mismatched.append(path)
            elif fname == "golden.json":
                bad = json_close(json.loads(open(path).read()), json.loads(data))
                if bad:
                    mismatched.append(f"{path} at {bad}")
            elif open(path, "rb").read() != data:
                mismatched.append(path)
        else:
            os.makedirs(case_dir, exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
    return ", ".join(f"{k} {len(v) // 1024} KiB" for k, v in files.items())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    ap.add_argument("--report", help="also write the self-check numbers to this JSON file")
    args = ap.parse_args()
    torch.set_num_threads(1)   # reproducible reductions
    report, mismatched = {}, []
    for idx, (name, cfg) in enumerate(CASES.items()):
        files, info = build_case(idx, name, cfg)
        report[name] = info
        sizes = write_or_check(os.path.join(HERE, name), files, args.check, mismatched)
        print(f"{name:22s} loss {float(json.loads(files['golden.json'])['loss']):.6f}  "
              f"fp32 logit err {info['fp32_max_abs_logit_err']:.1e}  "
              f"min wrong-variant delta {min(info['wrong_variant_max_abs_logit_delta'].values()):.2e}  ({sizes})")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=2)
    if args.check:
        if mismatched:
            print("MISMATCH:\n  " + "\n  ".join(mismatched))
            return 1
        print("all golden files match")
    return 0


if __name__ == "__main__":
    sys.exit(main())
