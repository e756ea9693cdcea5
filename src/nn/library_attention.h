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

// True when this build's libtorch has the variable-length flash kernel with
// a causal window (libtorch 2.11, the CUDA build's) and it takes `q`: on a
// CUDA device, float16 or bfloat16, a head dimension that is a multiple of 8
// up to 256. (The kernel also needs compute capability 8.0 or later and
// says so otherwise.)
bool library_varlen_attention_fits(const at::Tensor& q);
// Whether this build's libtorch has that kernel at all.
bool library_varlen_attention_built();

// That kernel (nn/varlen_attention.h's VarlenAttentionCore) with `scale`.
at::Tensor library_varlen_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const at::Tensor& cumulative_lengths, int64_t longest,
                                    std::optional<int64_t> window, double scale);

}  // namespace tessel::nn
