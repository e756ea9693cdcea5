"""Independent float64 reference for the decoder-only families tessel supports.

Written from the architecture facts in shared/reference/ (gemma3_notes.md,
qwen2_notes.md, qwen3_notes.md, llama3_rope_scaling.md, hf_configs/), not from
transformers code. One function, `forward`, covers Llama, Mistral, Qwen2,
Qwen3 and Gemma3-text; the per-family differences are read from the HF
config.json into a `Arch` record so each difference is visible in one place.

Parameters are a dict {HF name: tensor}. The goldens are computed in float64;
forward() follows the dtype of its parameters (float32 is used only to
measure fp32 noise).

`Wrong` holds deliberate mistakes (interleaved RoPE, off-by-one window, ...).
generate.py uses them only to prove that each golden file would catch that
mistake by a margin far above fp32 noise; they are never used for the goldens.
"""

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch

IGNORE_INDEX = -100


# ---------------------------------------------------------------------------
# Config -> architecture record
# ---------------------------------------------------------------------------

@dataclass
class Arch:
    family: str                   # llama | mistral | qwen2 | qwen3 | gemma3
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    eps: float
    tied: bool
    qkv_bias: bool                # bias on q/k/v projections
    o_bias: bool                  # bias on o_proj (llama attention_bias)
    mlp_bias: bool
    qk_norm: bool                 # per-head q_norm / k_norm (qwen3, gemma3)
    gemma_norm: bool              # (1 + w) RMSNorm
    sandwich: bool                # gemma3: 4 norms per layer
    embed_scale: float            # 1.0, or sqrt(hidden) for gemma3
    act: str                      # "silu" | "gelu_pytorch_tanh"
    attn_scale: float             # multiplier of q.k
    final_softcap: Optional[float]
    # per layer: sliding window size (None = full causal) and RoPE inverse freqs
    windows: List[Optional[int]] = field(default_factory=list)
    inv_freqs: List[torch.Tensor] = field(default_factory=list)
    # raw inputs of the above, kept only for the `Wrong` variants
    rope_bases: List[tuple] = field(default_factory=list)      # (base, scaling) per layer
    sliding_window_cfg: Optional[int] = None
    rope_theta: float = 10000.0
    rope_local_base: Optional[float] = None


def rope_inv_freq(base: float, head_dim: int, scaling: Optional[dict]) -> torch.Tensor:
    """inv_freq_i = 1 / base^(2i/d), i = 0..d/2-1, optionally llama3-rescaled."""
    d = head_dim
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    if scaling is None:
        return inv
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "default":
        return inv
    if kind != "llama3":
        raise ValueError(f"rope_scaling type {kind!r} not supported by the reference")
    s = float(scaling["factor"])
    lo = float(scaling["low_freq_factor"])
    hi = float(scaling["high_freq_factor"])
    L = float(scaling["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    low_freq_wavelen = L / lo     # longer than this: divide by s
    high_freq_wavelen = L / hi    # shorter than this: keep
    out = inv.clone()
    for i in range(inv.numel()):
        lam = wavelen[i].item()
        f = inv[i].item()
        if lam < high_freq_wavelen:
            out[i] = f
        elif lam > low_freq_wavelen:
            out[i] = f / s
        else:
            r = (L / lam - lo) / (hi - lo)
            out[i] = (1 - r) * f / s + r * f
    return out


def arch_from_config(cfg: dict) -> Arch:
    mt = cfg["model_type"]
    family = {"llama": "llama", "mistral": "mistral", "qwen2": "qwen2",
              "qwen3": "qwen3", "gemma3_text": "gemma3"}[mt]
    hidden = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads)
    head_dim = cfg.get("head_dim") or hidden // heads
    n_layers = cfg["num_hidden_layers"]
    scaling = cfg.get("rope_scaling")
    theta = float(cfg.get("rope_theta", 10000.0))

    a = Arch(
        family=family, hidden=hidden, intermediate=cfg["intermediate_size"],
        layers=n_layers, heads=heads, kv_heads=kv, head_dim=head_dim,
        vocab=cfg["vocab_size"], eps=float(cfg["rms_norm_eps"]),
        tied=bool(cfg.get("tie_word_embeddings", family == "gemma3")),
        qkv_bias=False, o_bias=False, mlp_bias=bool(cfg.get("mlp_bias", False)),
        qk_norm=family in ("qwen3", "gemma3"),
        gemma_norm=family == "gemma3", sandwich=family == "gemma3",
        embed_scale=math.sqrt(hidden) if family == "gemma3" else 1.0,
        act=cfg.get("hidden_activation") if family == "gemma3" else cfg.get("hidden_act", "silu"),
        attn_scale=(cfg["query_pre_attn_scalar"] ** -0.5) if family == "gemma3" else head_dim ** -0.5,
        final_softcap=cfg.get("final_logit_softcapping") if family == "gemma3" else None,
    )
    if family == "qwen2":
        a.qkv_bias = True              # unconditional in Qwen2, no config field
    elif family in ("llama", "mistral", "qwen3", "gemma3"):
        a.qkv_bias = a.o_bias = bool(cfg.get("attention_bias", False))

    for i in range(n_layers):
        window = None
        base, layer_scaling = theta, scaling
        if family == "mistral":
            window = cfg.get("sliding_window")
        elif family in ("qwen2", "qwen3"):
            if cfg.get("use_sliding_window", False) and i >= cfg.get("max_window_layers", n_layers):
                window = cfg.get("sliding_window")
        elif family == "gemma3":
            if "layer_types" in cfg:
                lt = cfg["layer_types"][i]
            else:
                p = cfg["sliding_window_pattern"]
                lt = "full_attention" if (i + 1) % p == 0 else "sliding_attention"
            if lt == "sliding_attention":
                window = cfg["sliding_window"]
                base, layer_scaling = float(cfg["rope_local_base_freq"]), None
        a.windows.append(window)
        a.inv_freqs.append(rope_inv_freq(base, head_dim, layer_scaling))
        a.rope_bases.append((base, layer_scaling))
    a.sliding_window_cfg = cfg.get("sliding_window")
    a.rope_theta = theta
    if family == "gemma3":
        a.rope_local_base = float(cfg["rope_local_base_freq"])
    return a


def param_shapes(a: Arch) -> Dict[str, tuple]:
    """HF parameter names and shapes ([out, in] for Linear weights)."""
    H, I, D = a.hidden, a.intermediate, a.head_dim
    s = {"model.embed_tokens.weight": (a.vocab, H)}
    for i in range(a.layers):
        p = f"model.layers.{i}."
        s[p + "input_layernorm.weight"] = (H,)
        s[p + "self_attn.q_proj.weight"] = (a.heads * D, H)
        s[p + "self_attn.k_proj.weight"] = (a.kv_heads * D, H)
        s[p + "self_attn.v_proj.weight"] = (a.kv_heads * D, H)
        s[p + "self_attn.o_proj.weight"] = (H, a.heads * D)
        if a.qkv_bias:
            s[p + "self_attn.q_proj.bias"] = (a.heads * D,)
            s[p + "self_attn.k_proj.bias"] = (a.kv_heads * D,)
            s[p + "self_attn.v_proj.bias"] = (a.kv_heads * D,)
        if a.o_bias:
            s[p + "self_attn.o_proj.bias"] = (H,)
        if a.qk_norm:
            s[p + "self_attn.q_norm.weight"] = (D,)
            s[p + "self_attn.k_norm.weight"] = (D,)
        s[p + "post_attention_layernorm.weight"] = (H,)
        if a.sandwich:
            s[p + "pre_feedforward_layernorm.weight"] = (H,)
            s[p + "post_feedforward_layernorm.weight"] = (H,)
        s[p + "mlp.gate_proj.weight"] = (I, H)
        s[p + "mlp.up_proj.weight"] = (I, H)
        s[p + "mlp.down_proj.weight"] = (H, I)
        if a.mlp_bias:
            s[p + "mlp.gate_proj.bias"] = (I,)
            s[p + "mlp.up_proj.bias"] = (I,)
            s[p + "mlp.down_proj.bias"] = (H,)
    s["model.norm.weight"] = (H,)
    if not a.tied:
        s["lm_head.weight"] = (a.vocab, H)
    return s


# ---------------------------------------------------------------------------
# Deliberate mistakes, used only for the sensitivity self-check
# ---------------------------------------------------------------------------

@dataclass
class Wrong:
    rope_interleaved: bool = False     # pair (2j, 2j+1) instead of (j, j+d/2)
    no_rope_scaling: bool = False      # ignore llama3 rope_scaling
    window_off_by_one: bool = False    # allow i - j <= window instead of < window
    no_window: bool = False            # ignore sliding window
    window_everywhere: bool = False    # apply cfg sliding_window to every layer
    swap_gemma_rope_bases: bool = False
    plain_norm_w: bool = False         # gemma: w*x instead of (1+w)*x
    no_embed_scale: bool = False
    head_dim_scale: bool = False       # gemma: head_dim^-0.5 instead of query_pre_attn_scalar^-0.5
    no_qk_norm: bool = False
    no_sandwich: bool = False          # gemma: skip post_attention/post_feedforward norms
    exact_gelu: bool = False
    kv_head_tiled: bool = False        # query head h uses kv head h % kv (instead of h // group)
    no_softcap: bool = False
    no_qkv_bias: bool = False


# ---------------------------------------------------------------------------
# Building blocks (float64)
# ---------------------------------------------------------------------------

def rms_norm(x, w, eps, gemma, wrong: Wrong):
    # HF Llama: x.float() * rsqrt(mean(x^2) + eps), cast back, then w * x.
    # Gemma: same normalisation, then * (1 + w) (all in fp32).  In float64 the
    # casts are no-ops.
    xn = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    if gemma and not wrong.plain_norm_w:
        return xn * (1.0 + w)
    return xn * w


def rotate_half(x):
    d = x.shape[-1] // 2
    return torch.cat((-x[..., d:], x[..., :d]), dim=-1)


def apply_rope(x, inv_freq, wrong: Wrong):
    """x: [B, nh, T, D]. Position p of the sequence is p = 0..T-1.
    Runs in x.dtype (float64 for the goldens; float32 only for the noise estimate)."""
    T, D = x.shape[-2], x.shape[-1]
    pos = torch.arange(T, dtype=x.dtype)
    ang = pos[:, None] * inv_freq.to(x.dtype)[None, :]  # [T, D/2]
    if wrong.rope_interleaved:
        cos = torch.cos(ang).repeat_interleave(2, -1)
        sin = torch.sin(ang).repeat_interleave(2, -1)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        rot = torch.stack((-x2, x1), dim=-1).reshape(x.shape)
        return x * cos + rot * sin
    emb = torch.cat((ang, ang), dim=-1)                  # [T, D]
    return x * torch.cos(emb) + rotate_half(x) * torch.sin(emb)


def linear(x, p, name, bias: bool):
    y = x @ p[name + ".weight"].t()
    if bias:
        y = y + p[name + ".bias"]
    return y


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def activation(x, a: Arch, wrong: Wrong):
    if a.act == "silu":
        return x * torch.sigmoid(x)
    if a.act == "gelu_pytorch_tanh":
        if wrong.exact_gelu:
            return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
        return gelu_tanh(x)
    raise ValueError(a.act)


def attention_mask(T: int, window: Optional[int], wrong: Wrong):
    """True = key j visible from query i. Causal: j <= i.
    Sliding window w: additionally i - j < w (the query itself plus the
    previous w - 1 tokens)."""
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    m = j <= i
    if window is not None and not wrong.no_window:
        if wrong.window_off_by_one:
            m = m & (i - j <= window)
        else:
            m = m & (i - j < window)
    return m


def attention(x, p, pre, a: Arch, layer: int, wrong: Wrong):
    B, T, _ = x.shape
    D, nh, nkv = a.head_dim, a.heads, a.kv_heads
    bias = a.qkv_bias and not wrong.no_qkv_bias
    q = linear(x, p, pre + "q_proj", bias).view(B, T, nh, D)
    k = linear(x, p, pre + "k_proj", bias).view(B, T, nkv, D)
    v = linear(x, p, pre + "v_proj", bias).view(B, T, nkv, D)
    if a.qk_norm and not wrong.no_qk_norm:   # per head, over head_dim, before RoPE
        q = rms_norm(q, p[pre + "q_norm.weight"], a.eps, a.gemma_norm, wrong)
        k = rms_norm(k, p[pre + "k_norm.weight"], a.eps, a.gemma_norm, wrong)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))     # [B, heads, T, D]

    inv_freq = a.inv_freqs[layer]
    if wrong.no_rope_scaling or wrong.swap_gemma_rope_bases:
        inv_freq = wrong_inv_freq(a, layer, wrong)
    q = apply_rope(q, inv_freq, wrong)
    k = apply_rope(k, inv_freq, wrong)

    group = nh // nkv                                    # GQA: query head h uses kv head h // group
    if wrong.kv_head_tiled:
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
    else:
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)

    scale = a.attn_scale
    if wrong.head_dim_scale:
        scale = D ** -0.5
    scores = (q @ k.transpose(-1, -2)) * scale           # [B, nh, T, T]
    window = a.windows[layer]
    if wrong.window_everywhere:
        window = a.sliding_window_cfg
    mask = attention_mask(T, window, wrong)
    scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = (probs @ v).transpose(1, 2).reshape(B, T, nh * D)
    return linear(out, p, pre + "o_proj", a.o_bias)


def wrong_inv_freq(a: Arch, layer: int, wrong: Wrong):
    base, scaling = a.rope_bases[layer]
    if wrong.swap_gemma_rope_bases:
        base = a.rope_theta if base == a.rope_local_base else a.rope_local_base
    if wrong.no_rope_scaling:
        scaling = None
    return rope_inv_freq(base, a.head_dim, scaling)


def mlp(x, p, pre, a: Arch, wrong: Wrong):
    g = linear(x, p, pre + "gate_proj", a.mlp_bias)
    u = linear(x, p, pre + "up_proj", a.mlp_bias)
    return linear(activation(g, a, wrong) * u, p, pre + "down_proj", a.mlp_bias)


def forward(p: Dict[str, torch.Tensor], a: Arch, tokens: torch.Tensor, wrong: Wrong = Wrong()):
    """tokens [B, T] int64 -> logits [B, T, V] float64."""
    emb = p["model.embed_tokens.weight"]
    h = emb[tokens]
    if not wrong.no_embed_scale:
        h = h * a.embed_scale
    for i in range(a.layers):
        pre = f"model.layers.{i}."
        x = rms_norm(h, p[pre + "input_layernorm.weight"], a.eps, a.gemma_norm, wrong)
        x = attention(x, p, pre + "self_attn.", a, i, wrong)
        if a.sandwich:
            if not wrong.no_sandwich:
                x = rms_norm(x, p[pre + "post_attention_layernorm.weight"], a.eps, True, wrong)
            h = h + x
            x = rms_norm(h, p[pre + "pre_feedforward_layernorm.weight"], a.eps, True, wrong)
            x = mlp(x, p, pre + "mlp.", a, wrong)
            if not wrong.no_sandwich:
                x = rms_norm(x, p[pre + "post_feedforward_layernorm.weight"], a.eps, True, wrong)
            h = h + x
        else:
            h = h + x
            x = rms_norm(h, p[pre + "post_attention_layernorm.weight"], a.eps, False, wrong)
            h = h + mlp(x, p, pre + "mlp.", a, wrong)
    h = rms_norm(h, p["model.norm.weight"], a.eps, a.gemma_norm, wrong)
    head = emb if a.tied else p["lm_head.weight"]        # tied: raw (unscaled) embedding
    logits = h @ head.t()
    if a.final_softcap is not None and not wrong.no_softcap:
        c = a.final_softcap
        logits = c * torch.tanh(logits / c)
    return logits


def loss_fn(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over all positions (whole batch) whose label != -100.
    labels are already aligned with logits (no shift inside)."""
    V = logits.shape[-1]
    lp = torch.log_softmax(logits.reshape(-1, V), dim=-1)
    y = labels.reshape(-1)
    keep = y != IGNORE_INDEX
    nll = -lp[keep].gather(1, y[keep][:, None]).squeeze(1)
    return nll.sum() / keep.sum()
