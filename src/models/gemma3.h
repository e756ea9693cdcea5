// Gemma 3 text decoder (Gemma3ForCausalLM; shared/reference/gemma3_notes.md).
// Each layer has "sandwich" norms, all (1 + w) RMSNorms computed in fp32:
//   h = h + post_attention_layernorm(self_attn(input_layernorm(h)))
//   h = h + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))
// Attention uses per-head q_norm/k_norm, scale query_pre_attn_scalar^-0.5,
// and is local (sliding window, RoPE base rope_local_base_freq, unscaled) or
// global (full causal, rope_theta plus rope_scaling) per layer_types or
// sliding_window_pattern. Embeddings are multiplied by sqrt(hidden_size) in
// the activation dtype; a tied lm_head uses the unscaled matrix.
#pragma once

#include <memory>

#include "models/causal_lm.h"
#include "models/families.h"
#include "nn/attention.h"
#include "nn/mlp.h"
#include "nn/module.h"
#include "nn/rms_norm.h"

namespace tessel::models {

class Gemma3DecoderLayer : public nn::Module {
 public:
  Gemma3DecoderLayer(const nn::AttentionOptions& attention, int64_t intermediate_size,
                     nn::Activation act, double eps, const at::TensorOptions& options);
  const std::shared_ptr<nn::Attention>& self_attn() const { return self_attn_; }

 protected:
  // {hidden [B, T, H], cos, sin[, document_ids [B, T]]} -> {hidden}; document_ids
  // (packed rows) are passed to self_attn as its 4th input.
  nn::Tensors forward(const nn::Tensors& inputs) override;

 private:
  std::shared_ptr<nn::Attention> self_attn_;
  std::shared_ptr<nn::GatedMLP> mlp_;
  std::shared_ptr<nn::RMSNorm> input_layernorm_, post_attention_layernorm_;
  std::shared_ptr<nn::RMSNorm> pre_feedforward_layernorm_, post_feedforward_layernorm_;
};

}  // namespace tessel::models
