// RMSNorm in the two Hugging Face forms. Both normalise in float32:
//   x̂ = x / sqrt(mean(x², last dim) + eps)
// - Llama (Llama, Mistral, Qwen2, Qwen3): cast x̂ back to the input dtype,
//   then multiply by w (w initialised to ones).
// - Gemma: multiply x̂ by (1 + w) in float32, then cast (w stored as an
//   offset, initialised to zeros).
// Parameter "weight" [dim]. Works on any leading shape (q_norm/k_norm run on
// [B, T, heads, head_dim]).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>

#include "nn/module.h"

namespace tessel::nn {

enum class RMSNormStyle { Llama, Gemma };

class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, double eps, RMSNormStyle style, const at::TensorOptions& options);
  at::Tensor weight() const { return parameter("weight"); }
  double eps() const { return eps_; }
  RMSNormStyle style() const { return style_; }
  // The weight value that makes the norm a plain normalisation (1 or 0).
  double identity_weight() const { return style_ == RMSNormStyle::Gemma ? 0.0 : 1.0; }

 protected:
  Tensors forward(const Tensors& inputs) override;

 private:
  double eps_;
  RMSNormStyle style_;
};

}  // namespace tessel::nn
