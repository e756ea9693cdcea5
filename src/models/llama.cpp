#include "models/llama.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "models/decoder_inputs.h"
#include "nn/sparse_moe.h"

namespace tessel::models {

LlamaDecoderLayer::LlamaDecoderLayer(const nn::AttentionOptions& attention, std::shared_ptr<nn::Module> feed_forward,
                                     const std::string& feed_forward_name, double eps,
                                     const at::TensorOptions& options)
    : nn::Module("LlamaDecoderLayer") {
  const int64_t hidden = attention.hidden_size;
  // Registration order = HF's, so checkpoints list tensors in the same order.
  self_attn_ = register_module("self_attn", std::make_shared<nn::Attention>(attention, options));
  feed_forward_ = register_module(feed_forward_name, std::move(feed_forward));
  input_layernorm_ = register_module(
      "input_layernorm", std::make_shared<nn::RMSNorm>(hidden, eps, nn::RMSNormStyle::Llama, options));
  post_attention_layernorm_ = register_module(
      "post_attention_layernorm", std::make_shared<nn::RMSNorm>(hidden, eps, nn::RMSNormStyle::Llama, options));
}

nn::Tensors LlamaDecoderLayer::forward(const nn::Tensors& inputs) {
  at::Tensor h = inputs.at(0);
  nn::Tensors attn_in = attention_inputs(*this, inputs, input_layernorm_->call(h));
  h = h + self_attn_->call(std::move(attn_in))[0];
  // A sparse block's router logits pass through as the layer's 2nd output.
  nn::Tensors out = feed_forward_->call(nn::Tensors{post_attention_layernorm_->call(h)});
  out[0] = h + out[0];
  return out;
}

nn::AttentionOptions llama_attention_options(const ModelConfig& c, const LlamaVariant& v, int64_t layer) {
  nn::AttentionOptions o;
  o.hidden_size = c.hidden_size;
  o.num_heads = c.num_attention_heads;
  o.num_kv_heads = c.num_key_value_heads;
  o.head_dim = c.head_dim;
  o.qkv_bias = v.qkv_bias;
  o.o_bias = v.o_bias;
  o.qk_norm = v.qk_norm;
  o.norm_style = nn::RMSNormStyle::Llama;
  o.norm_eps = c.rms_norm_eps;
  o.scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  o.sliding_window = layer_sliding_window(c, layer);
  o.logit_softcap = c.attn_logit_softcapping;
  return o;
}

std::shared_ptr<CausalLM> build_llama_like(const ModelConfig& c, const LlamaVariant& v,
                                           const BuildOptions& options, const MoeBlockNames& moe_names) {
  const at::TensorOptions t = options.tensor_options();
  const nn::Activation act = nn::parse_activation(c.hidden_act);
  DecoderModel::Parts parts;
  parts.embed_tokens = std::make_shared<nn::Embedding>(c.vocab_size, c.hidden_size, t);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    std::shared_ptr<nn::Module> feed_forward;
    std::string name = "mlp";
    if (is_moe_layer(c, i)) {
      feed_forward = std::make_shared<nn::SparseMoeBlock>(
          nn::SparseMoeOptions{c.hidden_size, c.moe_intermediate_size, c.num_experts, c.num_experts_per_tok,
                               c.norm_topk_prob, act, moe_names.experts},
          t);
      name = moe_names.block;
    } else {
      feed_forward = std::make_shared<nn::GatedMLP>(c.hidden_size, c.intermediate_size, act, c.mlp_bias, t);
    }
    parts.layers.push_back(std::make_shared<LlamaDecoderLayer>(llama_attention_options(c, v, i),
                                                               std::move(feed_forward), name, c.rms_norm_eps, t));
    parts.layer_rotary.push_back(0);
  }
  parts.rotaries.emplace_back(c.head_dim, c.rope_theta, c.rope_scaling);
  parts.norm = std::make_shared<nn::RMSNorm>(c.hidden_size, c.rms_norm_eps, nn::RMSNormStyle::Llama, t);
  return make_causal_lm(c, std::make_shared<DecoderModel>(std::move(parts)));
}

std::shared_ptr<CausalLM> build_llama(const ModelConfig& c, const BuildOptions& options) {
  return build_llama_like(c, LlamaVariant{c.attention_bias, c.attention_bias, false}, options);
}

}  // namespace tessel::models
