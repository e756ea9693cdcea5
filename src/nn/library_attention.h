// libtorch's own fused attention (at::scaled_dot_product_attention, libtorch
// 2.5 and later: causal, grouped K/V heads without repeating them, a flash
// kernel with its own backward on CPU), where the build has it. Builds
// against Debian's libtorch 1.13 have not: there it reports absent and
// Attention keeps tiled_causal_attention. Measured against the tiled kernel
// in docs/libtorch2.md. On a GPU it is the flash or memory-efficient kernel,
// and also serves sliding windows and packed documents, as a mask (SPEC 10).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace tessel::nn {

// True when this build's libtorch has the fused causal kernel with grouped
// K/V heads.
bool library_attention_available();

// The library's kernel with an explicit mask: visible [B or 1, 1, Lq, Lk]
// bool, true where the query may see the key (every query sees one), or
// undefined for causal; nn/window_bands.h's MaskedAttentionCore. Only call
// when available.
at::Tensor library_masked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const at::Tensor& visible, double scale);

// q [B, Hq, T, D], k and v [B, Hkv, T, D] (Hkv divides Hq): causal attention
// (no softcap: the library has none). A sliding window or document ids
// [B, T] (attention stays within each document) become a boolean mask of
// the keys each query may see; a window short against the row is attended
// in bands of queries, each with only the keys its window reaches
// (nn/window_bands.h). Only call when available.
at::Tensor library_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    double scale,
                                    std::optional<int64_t> sliding_window = std::nullopt,
                                    const at::Tensor& document_ids = {});

}  // namespace tessel::nn
