#include "models/gemma3.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/error.h"
#include "models/decoder_inputs.h"

namespace tessel::models {

namespace {
std::shared_ptr<nn::RMSNorm> gemma_norm(int64_t dim, double eps, const at::TensorOptions& t) {
  return std::make_shared<nn::RMSNorm>(dim, eps, nn::RMSNormStyle::Gemma, t);
}
}  // namespace

Gemma3DecoderLayer::Gemma3DecoderLayer(const nn::AttentionOptions& attention, int64_t intermediate_size,
                                       nn::Activation act, double eps, const at::TensorOptions& t)
    : nn::Module("Gemma3DecoderLayer") {
  const int64_t hidden = attention.hidden_size;
  self_attn_ = register_module("self_attn", std::make_shared<nn::Attention>(attention, t));
  mlp_ = register_module("mlp", std::make_shared<nn::GatedMLP>(hidden, intermediate_size, act, false, t));
  input_layernorm_ = register_module("input_layernorm", gemma_norm(hidden, eps, t));
  post_attention_layernorm_ = register_module("post_attention_layernorm", gemma_norm(hidden, eps, t));
  pre_feedforward_layernorm_ = register_module("pre_feedforward_layernorm", gemma_norm(hidden, eps, t));
  post_feedforward_layernorm_ = register_module("post_feedforward_layernorm", gemma_norm(hidden, eps, t));
}

nn::Tensors Gemma3DecoderLayer::forward(const nn::Tensors& inputs) {
  at::Tensor h = inputs.at(0);
  nn::Tensors attn_in = attention_inputs(*this, inputs, input_layernorm_->call(h));
  at::Tensor a = self_attn_->call(std::move(attn_in))[0];
  h = h + post_attention_layernorm_->call(a);
  h = h + post_feedforward_layernorm_->call(mlp_->call(pre_feedforward_layernorm_->call(h)));
  return {h};
}

std::shared_ptr<CausalLM> build_gemma3(const ModelConfig& c, const BuildOptions& options) {
  const at::TensorOptions t = options.tensor_options();
  const nn::Activation act = nn::parse_activation(c.hidden_act);
  TESSEL_CHECK(c.query_pre_attn_scalar.value_or(256.0) > 0, "{}: query_pre_attn_scalar must be positive",
               c.source);
  DecoderModel::Parts parts;
  parts.embed_tokens = std::make_shared<nn::Embedding>(c.vocab_size, c.hidden_size, t);
  // rotaries[0]: global layers (rope_theta + rope_scaling); [1]: local layers.
  parts.rotaries.emplace_back(c.head_dim, c.rope_theta, c.rope_scaling);
  parts.rotaries.emplace_back(c.head_dim, c.rope_local_base_freq, std::nullopt);
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const bool global = gemma3_is_global_layer(c, i);
    nn::AttentionOptions o;
    o.hidden_size = c.hidden_size;
    o.num_heads = c.num_attention_heads;
    o.num_kv_heads = c.num_key_value_heads;
    o.head_dim = c.head_dim;
    o.qkv_bias = o.o_bias = c.attention_bias;
    o.qk_norm = true;
    o.norm_style = nn::RMSNormStyle::Gemma;
    o.norm_eps = c.rms_norm_eps;
    o.scale = 1.0 / std::sqrt(c.query_pre_attn_scalar.value_or(256.0));
    o.sliding_window = layer_sliding_window(c, i);
    o.logit_softcap = c.attn_logit_softcapping;
    parts.layers.push_back(std::make_shared<Gemma3DecoderLayer>(o, c.intermediate_size, act, c.rms_norm_eps, t));
    parts.layer_rotary.push_back(global ? 0 : 1);
  }
  parts.norm = gemma_norm(c.hidden_size, c.rms_norm_eps, t);
  parts.embed_scale = std::sqrt(static_cast<double>(c.hidden_size));
  return make_causal_lm(c, std::make_shared<DecoderModel>(std::move(parts)));
}

}  // namespace tessel::models
