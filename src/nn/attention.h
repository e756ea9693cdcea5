// Causal self-attention with grouped-query heads and Hugging Face names
// (q_proj, k_proj, v_proj, o_proj, optional per-head q_norm/k_norm).
//
// Head counts are derived at each call from the current q_proj/k_proj output
// widths and the fixed head_dim, so a tensor-parallel shard holding a subset
// of the heads runs unchanged. Scores are computed one key/value head group at
// a time: at most one [B, group, T, T] score tensor exists at once rather than
// [B, heads, T, T] plus the repeated K/V copies of a naive implementation.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "nn/linear.h"
#include "nn/module.h"
#include "nn/rms_norm.h"

namespace tessel::nn {

struct AttentionOptions {
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool qkv_bias = false;  // bias on q/k/v_proj (Qwen2; Llama attention_bias)
  bool o_bias = false;    // bias on o_proj (Llama attention_bias)
  // Per-head RMSNorm over head_dim of Q and K, before RoPE (Qwen3, Gemma3).
  bool qk_norm = false;
  RMSNormStyle norm_style = RMSNormStyle::Llama;
  double norm_eps = 1e-6;
  double scale = 0;  // multiplier of q·k; 0 means head_dim^-0.5
  // Keys visible from query i: i - window < j <= i (Mistral, Gemma3 local).
  std::optional<int64_t> sliding_window;
  std::optional<double> logit_softcap;  // scores -> cap * tanh(scores / cap)
};

// The attention core. q [B, Hq, T, D], k and v [B, Hkv, T, D] with Hkv
// dividing Hq (query head h uses kv head h / (Hq / Hkv)). Returns [B, Hq, T, D].
// Causal by sequence index; softmax in float32 (float64 for float64 inputs),
// probabilities cast back to the input dtype.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale, std::optional<int64_t> sliding_window = std::nullopt,
                            std::optional<double> logit_softcap = std::nullopt);

class Attention : public Module {
 public:
  Attention(const AttentionOptions& options, const at::TensorOptions& tensor_options);
  const AttentionOptions& options() const { return options_; }
  const std::shared_ptr<Linear>& q_proj() const { return q_proj_; }
  const std::shared_ptr<Linear>& k_proj() const { return k_proj_; }
  const std::shared_ptr<Linear>& v_proj() const { return v_proj_; }
  const std::shared_ptr<Linear>& o_proj() const { return o_proj_; }

 protected:
  // {x [B, T, hidden], cos [B, T, D], sin [B, T, D]} -> {[B, T, hidden]}
  Tensors forward(const Tensors& inputs) override;

 private:
  AttentionOptions options_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, o_proj_;
  std::shared_ptr<RMSNorm> q_norm_, k_norm_;
};

}  // namespace tessel::nn
