#include "nn/library_attention.h"

#include <torch/version.h>

#include "core/error.h"

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
#include <ATen/ops/scaled_dot_product_attention.h>
#define TESSEL_HAS_LIBRARY_ATTENTION 1
#endif

namespace tessel::nn {

bool library_attention_available() {
#ifdef TESSEL_HAS_LIBRARY_ATTENTION
  return true;
#else
  return false;
#endif
}

at::Tensor library_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
#ifdef TESSEL_HAS_LIBRARY_ATTENTION
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true, scale,
                                          /*enable_gqa=*/k.size(1) != q.size(1));
#else
  TESSEL_CHECK(false, "this build's libtorch ({}) has no fused attention kernel; it needs libtorch 2.5 or later",
               TORCH_VERSION);
  return {};
#endif
}

}  // namespace tessel::nn
