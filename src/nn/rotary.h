// Rotary position embeddings in Hugging Face's convention: the rotation pairs
// element j with element j + head_dim/2 ("rotate_half": [x1, x2] -> [-x2, x1])
// and cos/sin hold the frequencies concatenated twice. Angles are formed in
// float32 and cast to the activation dtype, as HF does.
//
// Frequency schedules (rope_scaling): none/"default", "linear" (all
// frequencies divided by factor; Gemma3 global layers of the larger models)
// and "llama3" (per-band rescaling, shared/reference/llama3_rope_scaling.md).
// The inverse frequencies are computed in double and rounded once to float32.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace tessel::nn {

struct RopeScaling {
  std::string type = "default";  // "default" | "linear" | "llama3"
  double factor = 1.0;
  double low_freq_factor = 1.0;                   // llama3
  double high_freq_factor = 4.0;                  // llama3
  double original_max_position_embeddings = 8192;  // llama3
};

class RotaryEmbedding {
 public:
  RotaryEmbedding(int64_t head_dim, double theta, std::optional<RopeScaling> scaling = std::nullopt);

  int64_t head_dim() const { return head_dim_; }
  double theta() const { return theta_; }
  // float32 [head_dim / 2] on the CPU.
  const at::Tensor& inv_freq() const { return inv_freq_; }

  // position_ids [B, T] (or [T]) integer -> (cos, sin), each [B, T, head_dim]
  // (or [T, head_dim]) in `dtype`, on position_ids' device.
  std::pair<at::Tensor, at::Tensor> cos_sin(const at::Tensor& position_ids,
                                            at::ScalarType dtype) const;

 private:
  int64_t head_dim_;
  double theta_;
  at::Tensor inv_freq_;
  // inv_freq_ on the device cos_sin last served (inv_freq_ itself on the
  // CPU): a copy from the host's pageable memory each forward would wait for
  // the device's queue.
  mutable at::Tensor inv_freq_here_;
};

// [x1, x2] -> [-x2, x1] along the last dim.
at::Tensor rotate_half(const at::Tensor& x);
// x [B, heads, T, D]; cos/sin [B, T, D] or [T, D].
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace tessel::nn
