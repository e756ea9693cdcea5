// The Llama family: pre-norm decoder layers
//   h = h + self_attn(input_layernorm(h));  h = h + mlp(post_attention_layernorm(h))
// with Llama-style RMSNorm (normalise in fp32, cast, times w). Mistral, Qwen2
// and Qwen3 are this layer with different attention options (sliding window,
// q/k/v biases, per-head q/k norms); their builders live in their own files
// and call build_llama_like(). Qwen3-MoE and Mixtral are the same layer with
// a sparse mixture-of-experts block (nn/sparse_moe.h) in place of the MLP on
// their MoE layers; such a layer returns the block's router logits as a
// second output.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

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
  // `feed_forward` is a GatedMLP (-> {y}) or a SparseMoeBlock (-> {y,
  // router_logits}), registered as `feed_forward_name` ("mlp"; Mixtral's
  // sparse block is "block_sparse_moe").
  LlamaDecoderLayer(const nn::AttentionOptions& attention, std::shared_ptr<nn::Module> feed_forward,
                    const std::string& feed_forward_name, double eps, const at::TensorOptions& options);
  const std::shared_ptr<nn::Attention>& self_attn() const { return self_attn_; }
  const std::shared_ptr<nn::Module>& feed_forward() const { return feed_forward_; }

 protected:
  // {hidden [B, T, H], cos, sin[, document_ids [B, T]]} -> {hidden} (dense)
  // or {hidden, router_logits [B*T, experts]} (MoE); document_ids (packed
  // rows) are passed to self_attn as its 4th input.
  nn::Tensors forward(const nn::Tensors& inputs) override;

 private:
  std::shared_ptr<nn::Attention> self_attn_;
  std::shared_ptr<nn::Module> feed_forward_;
  std::shared_ptr<nn::RMSNorm> input_layernorm_, post_attention_layernorm_;
};

// What distinguishes the Llama-like families.
struct LlamaVariant {
  bool qkv_bias = false;
  bool o_bias = false;
  bool qk_norm = false;
};

// The checkpoint names of the sparse block on MoE layers (is_moe_layer).
struct MoeBlockNames {
  std::string block = "mlp";
  nn::GatedMLPNames experts;
};

// Attention options of layer `layer` from the config (sizes, eps, scale,
// sliding window per layer_sliding_window()).
nn::AttentionOptions llama_attention_options(const ModelConfig& config, const LlamaVariant& variant,
                                             int64_t layer);

std::shared_ptr<CausalLM> build_llama_like(const ModelConfig& config, const LlamaVariant& variant,
                                           const BuildOptions& options, const MoeBlockNames& moe_names = {});

}  // namespace tessel::models
