#include "nn/rotary.h"

#include <ATen/ATen.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "core/error.h"
#include "nn/device_kernels.h"
#include "nn/rotary_kernel.h"

namespace tessel::nn {

namespace {

double llama3_frequency(double f, const RopeScaling& s) {
  const double low_freq_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_freq_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
  const double wavelen = 2 * std::numbers::pi / f;
  if (wavelen < high_freq_wavelen) return f;
  if (wavelen > low_freq_wavelen) return f / s.factor;
  const double r = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                   (s.high_freq_factor - s.low_freq_factor);
  return (1 - r) * f / s.factor + r * f;
}

}  // namespace

RotaryEmbedding::RotaryEmbedding(int64_t head_dim, double theta, std::optional<RopeScaling> scaling)
    : head_dim_(head_dim), theta_(theta) {
  TESSEL_CHECK(head_dim > 0 && head_dim % 2 == 0, "rotary head_dim must be positive and even, got {}",
               head_dim);
  TESSEL_CHECK(theta > 0, "rope_theta must be positive, got {}", theta);
  if (scaling) {
    const auto& t = scaling->type;
    TESSEL_CHECK(t == "default" || t == "linear" || t == "llama3",
                 "unsupported rope_scaling type '{}' (supported: default, linear, llama3)", t);
    TESSEL_CHECK(t == "default" || scaling->factor > 0, "rope_scaling factor must be positive, got {}",
                 scaling->factor);
    TESSEL_CHECK(t != "llama3" || scaling->high_freq_factor > scaling->low_freq_factor,
                 "llama3 rope_scaling needs high_freq_factor ({}) > low_freq_factor ({})",
                 scaling->high_freq_factor, scaling->low_freq_factor);
  }
  std::vector<float> freqs;
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    double f = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(head_dim));
    if (scaling && scaling->type == "linear") f /= scaling->factor;
    if (scaling && scaling->type == "llama3") f = llama3_frequency(f, *scaling);
    freqs.push_back(static_cast<float>(f));
  }
  inv_freq_ = at::tensor(freqs, at::TensorOptions().dtype(at::kFloat));
  inv_freq_here_ = inv_freq_;
}

std::pair<at::Tensor, at::Tensor> RotaryEmbedding::cos_sin(const at::Tensor& position_ids,
                                                           at::ScalarType dtype) const {
  TESSEL_CHECK(!at::isFloatingType(position_ids.scalar_type()),
               "position_ids must be integers, got {}", c10::toString(position_ids.scalar_type()));
  at::Tensor pos = position_ids.to(at::kFloat).unsqueeze(-1);             // [..., T, 1]
  if (inv_freq_here_.device() != position_ids.device()) inv_freq_here_ = inv_freq_.to(position_ids.device());
  at::Tensor angles = pos * inv_freq_here_;                              // [..., T, D/2]
  at::Tensor emb = at::cat({angles, angles}, -1);                        // [..., T, D]
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

at::Tensor rotate_half(const at::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  TESSEL_CHECK(x.dim() == 4, "apply_rotary expects [B, heads, T, D], got {} dims", x.dim());
  TESSEL_CHECK(cos.size(-1) == x.size(-1), "rotary cos/sin have dim {} but heads have {}",
               cos.size(-1), x.size(-1));
  // float32 on the CPU (the training dtype here), and on a CUDA device when
  // switched on (nn/device_kernels.h): one autograd node, hand-written
  // backward; otherwise HF's formula as ATen ops.
  if (rotary_fp32_applies(x, cos, sin)) return rotary_fp32(x, cos, sin);
  if (rotary_device_applies(x, cos, sin) && device_kernels_enabled()) return rotary_device(x, cos, sin);
  // Broadcast over the heads dim: [B, T, D] -> [B, 1, T, D]; [T, D] broadcasts as is.
  at::Tensor c = cos.dim() == 3 ? cos.unsqueeze(1) : cos;
  at::Tensor s = sin.dim() == 3 ? sin.unsqueeze(1) : sin;
  return x * c + rotate_half(x) * s;
}

}  // namespace tessel::nn
