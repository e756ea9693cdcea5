#include "nn/library_attention.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include "core/error.h"
#include "core/host_to_device.h"
#include "nn/document_runs.h"
#include "nn/window_bands.h"

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
#include <ATen/ops/scaled_dot_product_attention.h>
#define TESSEL_HAS_LIBRARY_ATTENTION 1
#endif
// The variable-length flash kernel's window arguments as tessel calls them:
// checked against 2.11's signature (older 2.x releases differ).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
#include <ATen/ops/_flash_attention_forward.h>
#define TESSEL_HAS_LIBRARY_VARLEN_ATTENTION 1
#endif

namespace tessel::nn {

bool library_attention_available() {
#ifdef TESSEL_HAS_LIBRARY_ATTENTION
  return true;
#else
  return false;
#endif
}

at::Tensor library_masked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const at::Tensor& visible, double scale) {
#ifdef TESSEL_HAS_LIBRARY_ATTENTION
  const bool grouped = k.size(1) != q.size(1);
  if (!visible.defined()) {  // causal (MaskedAttentionCore's convention, nn/window_bands.h)
    return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true, scale,
                                            grouped);
  }
  if (grouped && q.is_cuda() && (q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf)) {
    // With a mask, libtorch 2.11 runs grouped K/V heads only in its math
    // kernel (flash takes no mask, the memory-efficient kernel no unequal head
    // counts), which keeps [B, Hq, T, T] fp32 scores per layer for the
    // backward: GBs at T 2048. K/V repeated to the query's heads (what
    // enable_gqa does inside) take the memory-efficient kernel instead, for
    // B x Hq x T x D copies. (fp32 keeps the math kernel: the GPU's parity
    // runs compare it with the CPU at 1e-4.)
    const int64_t repeats = q.size(1) / k.size(1);
    return at::scaled_dot_product_attention(q, k.repeat_interleave(repeats, 1), v.repeat_interleave(repeats, 1),
                                            visible, /*dropout_p=*/0.0, /*is_causal=*/false, scale,
                                            /*enable_gqa=*/false);
  }
  return at::scaled_dot_product_attention(q, k, v, visible, /*dropout_p=*/0.0, /*is_causal=*/false, scale, grouped);
#else
  TESSEL_CHECK(false, "this build's libtorch ({}) has no fused attention kernel; it needs libtorch 2.5 or later",
               TORCH_VERSION);
  return {};
#endif
}

at::Tensor library_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    double scale, std::optional<int64_t> sliding_window,
                                    const at::Tensor& document_ids) {
#ifdef TESSEL_HAS_LIBRARY_ATTENTION
  if (!sliding_window && !document_ids.defined()) return library_masked_attention(q, k, v, {}, scale);  // causal
  const int64_t T = q.size(2);
  const at::Tensor doc = document_ids.defined() ? to_device_without_waiting(document_ids, q.device()) : at::Tensor();
  if (sliding_window && window_bands_pay(T, *sliding_window)) {
    // Bands of queries with the keys their window reaches (nn/window_bands.h).
    return attend_in_window_bands(q, k, v, *sliding_window, doc,
                                  [scale](const at::Tensor& bq, const at::Tensor& bk, const at::Tensor& bv,
                                          const at::Tensor& visible) {
                                    return library_masked_attention(bq, bk, bv, visible, scale);
                                  });
  }
  // true = the query may see the key: causal, within the window, same document.
  const auto idx = at::TensorOptions().dtype(at::kLong).device(q.device());
  const at::Tensor i = at::arange(T, idx).unsqueeze(1);
  const at::Tensor j = at::arange(T, idx).unsqueeze(0);
  at::Tensor visible = j <= i;
  if (sliding_window) visible = visible.logical_and(i - j < *sliding_window);
  visible = visible.unsqueeze(0);  // [1, T, T]
  if (doc.defined()) visible = visible.logical_and(doc.unsqueeze(2).eq(doc.unsqueeze(1)));  // [B, T, T]
  return library_masked_attention(q, k, v, visible.unsqueeze(1), scale);
#else
  return library_masked_attention(q, k, v, {}, scale);  // refuses, saying which libtorch it needs
#endif
}

bool library_varlen_attention_built() {
#ifdef TESSEL_HAS_LIBRARY_VARLEN_ATTENTION
  return true;
#else
  return false;
#endif
}

bool library_varlen_attention_fits(const at::Tensor& q) {
  return library_varlen_attention_built() && q.device().is_cuda() &&
         (q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf) && q.size(-1) % 8 == 0 &&
         q.size(-1) <= 256;
}

at::Tensor library_varlen_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const at::Tensor& cumulative_lengths, int64_t longest,
                                    std::optional<int64_t> window, double scale) {
#ifdef TESSEL_HAS_LIBRARY_VARLEN_ATTENTION
  TESSEL_CHECK(library_varlen_attention_fits(q), "the variable-length flash kernel takes CUDA float16 or bfloat16 "
               "with a head dimension that is a multiple of 8 up to 256, got {} {} of head dimension {}",
               q.device().str(), c10::toString(q.scalar_type()), q.size(-1));
  // Causal: the kernel's right window is 0; its left one counts the keys
  // before the query (tessel's window counts the query's own too).
  const std::optional<int64_t> left = window ? std::optional<int64_t>(*window - 1) : std::nullopt;
  const std::optional<int64_t> right = window ? std::optional<int64_t>(0) : std::nullopt;
  return std::get<0>(at::_flash_attention_forward(q, k, v, cumulative_lengths, cumulative_lengths, longest, longest,
                                                  /*dropout_p=*/0.0, /*is_causal=*/true,
                                                  /*return_debug_mask=*/false, scale, left, right));
#else
  TESSEL_CHECK(false, "this build's libtorch ({}) has no variable-length flash kernel tessel can call (2.11 has)",
               TORCH_VERSION);
  return {};
#endif
}

}  // namespace tessel::nn
