#include "nn/rms_norm.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "nn/device_kernels.h"
#include "nn/rms_norm_kernel.h"

namespace tessel::nn {

RMSNorm::RMSNorm(int64_t dim, double eps, RMSNormStyle style, const at::TensorOptions& options)
    : Module("RMSNorm"), eps_(eps), style_(style) {
  TESSEL_CHECK(dim > 0, "RMSNorm dim must be positive, got {}", dim);
  TESSEL_CHECK(eps > 0, "RMSNorm eps must be positive, got {}", eps);
  register_parameter("weight", at::empty({dim}, options));
}

Tensors RMSNorm::forward(const Tensors& inputs) {
  TESSEL_CHECK(inputs.size() == 1, "RMSNorm {} takes one input, got {}", path(), inputs.size());
  const at::Tensor& x = inputs[0];
  at::Tensor w = weight();
  TESSEL_CHECK(x.size(-1) == w.size(0), "RMSNorm {}: input last dim {} but weight has {}", path(),
               x.size(-1), w.size(0));
  // float32 on the CPU (the training dtype here), and any kernel dtype on a
  // CUDA device when switched on (nn/device_kernels.h): one autograd node,
  // hand-written backward; otherwise the composition below, HF's formula
  // verbatim.
  const bool offset = style_ == RMSNormStyle::Gemma;
  if (rms_norm_fp32_applies(x, w)) return {rms_norm_fp32(x, w, eps_, offset)};
  if (rms_norm_device_applies(x, w) && device_kernels_enabled()) return {rms_norm_device(x, w, eps_, offset)};
  at::Tensor x32 = x.to(at::kFloat);
  at::Tensor normed = x32 * at::rsqrt(x32.pow(2).mean({-1}, /*keepdim=*/true) + eps_);
  if (offset) return {(normed * (w.to(at::kFloat) + 1.0)).to(x.scalar_type())};
  return {w * normed.to(x.scalar_type())};
}

}  // namespace tessel::nn
