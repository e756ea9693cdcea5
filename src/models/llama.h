// The Llama family: pre-norm decoder layers
//   h = h + self_attn(input_layernorm(h));  h = h + mlp(post_attention_layernorm(h))
// with Llama-style RMSNorm (normalise in fp32, cast, times w). Mistral, Qwen2
// and Qwen3 are this layer with different attention options (sliding window,
// q/k/v biases, per-head q/k norms); their builders live in their own files
// and call build_llama_like().
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "models/causal_lm.h"
#include "models/families.h"
#include "models/model_config.h"
#include "nn/attention.h"
#include "nn/mlp.h"
#include "nn/module.h"
#include "nn/rms_norm.h"

namespace tessel::models {

class LlamaDecoderLayer : public nn::Module {
 public:
  LlamaDecoderLayer(const nn::AttentionOptions& attention, int64_t intermediate_size,
                    nn::Activation act, bool mlp_bias, double eps, const at::TensorOptions& options);
  const std::shared_ptr<nn::Attention>& self_attn() const { return self_attn_; }
  const std::shared_ptr<nn::GatedMLP>& mlp() const { return mlp_; }

 protected:
  // {hidden [B, T, H], cos, sin[, document_ids [B, T]]} -> {hidden}; document_ids
  // (packed rows) are passed to self_attn as its 4th input.
  nn::Tensors forward(const nn::Tensors& inputs) override;

 private:
  std::shared_ptr<nn::Attention> self_attn_;
  std::shared_ptr<nn::GatedMLP> mlp_;
  std::shared_ptr<nn::RMSNorm> input_layernorm_, post_attention_layernorm_;
};

// What distinguishes the Llama-like families.
struct LlamaVariant {
  bool qkv_bias = false;
  bool o_bias = false;
  bool qk_norm = false;
};

// Attention options of layer `layer` from the config (sizes, eps, scale,
// sliding window per layer_sliding_window()).
nn::AttentionOptions llama_attention_options(const ModelConfig& config, const LlamaVariant& variant,
                                             int64_t layer);

std::shared_ptr<CausalLM> build_llama_like(const ModelConfig& config, const LlamaVariant& variant,
                                           const BuildOptions& options);

}  // namespace tessel::models
