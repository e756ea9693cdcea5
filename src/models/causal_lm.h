// The causal language model skeleton shared by every family, laid out with
// Hugging Face's module names so parameters read exactly as in checkpoints:
//
//   CausalLM (root)
//     model          DecoderModel: embed_tokens, layers.N (family layer), norm
//     lm_head        Linear (tied: reads model.embed_tokens.weight, owns nothing)
//
// A family file (llama.cpp, gemma3.cpp, ...) supplies the decoder layers and
// the per-layer rotary schedule; this file runs the stack. Each decoder layer
// is a tessel Module called as {hidden [B, T, H], cos, sin} -> {hidden}, so
// FSDP wraps layers and TP styles hook into them by path.
//
// Packed rows (data::pack): forward_logits takes optional per-token
// position_ids (rotary angles restart per document) and document_ids. With
// document_ids the model appends them as a 4th input of every decoder layer
// and of its self_attn ({hidden, cos, sin, document_ids}), and attention is
// block-diagonal causal (nn/attention.h). The extra tensor sits after the
// positions tensor-parallel hooks touch (only position 0, the hidden states,
// is redistributed), so hooks and plans are unaffected; without document_ids
// every module gets exactly the inputs it always did.
//
// Mixture-of-experts models: a sparse decoder layer returns its router
// logits as a 2nd output; DecoderModel and CausalLM append them, in layer
// order, after their first output ({hidden | logits, router_logits of each
// MoE layer...}), so they stay on the autograd graph through FSDP's and
// activation checkpointing's hooks. forward_logits() keeps the logits only;
// forward_with_router_logits() returns both (the trainer's load-balancing
// loss, loss/load_balancing_loss.h).
//
// Tied embeddings are ONE tensor: named_parameters() lists it once as
// model.embed_tokens.weight; tied_parameter_names() gives the HF alias
// lm_head.weight -> model.embed_tokens.weight.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/model_config.h"
#include "nn/linear.h"
#include "nn/module.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"

namespace tessel::models {

// Where and in which dtype parameters are allocated. Parameters start
// uninitialised (at::empty); at::kMeta builds the structure without memory
// (for inspecting names and shapes of large models).
struct BuildOptions {
  at::ScalarType dtype = at::kFloat;
  c10::Device device = c10::Device(c10::kCPU);
  at::TensorOptions tensor_options() const { return at::TensorOptions().dtype(dtype).device(device); }
};

// HF's "model": embeddings, decoder layers, final norm.
class DecoderModel : public nn::Module {
 public:
  struct Parts {
    std::shared_ptr<nn::Embedding> embed_tokens;
    std::vector<std::shared_ptr<nn::Module>> layers;
    std::shared_ptr<nn::RMSNorm> norm;
    std::vector<nn::RotaryEmbedding> rotaries;  // distinct schedules
    std::vector<std::size_t> layer_rotary;      // layers[i] uses rotaries[layer_rotary[i]]
    std::optional<double> embed_scale;          // Gemma3: sqrt(hidden_size)
  };
  explicit DecoderModel(Parts parts);

  const std::shared_ptr<nn::Embedding>& embed_tokens() const { return embed_tokens_; }
  const std::shared_ptr<nn::ModuleList>& layers() const { return layers_; }
  const std::shared_ptr<nn::RMSNorm>& norm() const { return norm_; }
  const nn::RotaryEmbedding& rotary_of_layer(std::size_t layer) const;

 protected:
  // {input_ids [B, T] int64, optional position_ids [B, T] or [T] (undefined =
  // 0..T-1), optional document_ids [B, T] integer} -> {hidden [B, T, H],
  // router_logits [B*T, experts] of each MoE layer...}
  nn::Tensors forward(const nn::Tensors& inputs) override;

 private:
  std::shared_ptr<nn::Embedding> embed_tokens_;
  std::shared_ptr<nn::ModuleList> layers_;
  std::shared_ptr<nn::RMSNorm> norm_;
  std::vector<nn::RotaryEmbedding> rotaries_;
  std::vector<std::size_t> layer_rotary_;
  std::optional<double> embed_scale_;
};

// The logits and, for a mixture-of-experts model, each MoE layer's router
// logits [B*T, experts] in layer order (empty for a dense model). From
// forward_token_losses: each position's next-token cross-entropy [B, T] (0
// where there is no label) instead of the logits (logits undefined).
struct CausalLMOutput {
  at::Tensor logits;
  std::vector<at::Tensor> router_logits;
  at::Tensor token_losses = {};
};

class CausalLM : public nn::Module {
 public:
  // Builders use make_causal_lm(), which also assigns module paths.
  CausalLM(ModelConfig config, std::shared_ptr<DecoderModel> model);

  // input_ids [B, T] int64 -> logits [B, T, vocab] (through the root's hooks).
  // position_ids default to 0..T-1 for every row. document_ids (optional,
  // [B, T] integer, -1 = padding; data::Batch::document_ids) make attention
  // block-diagonal: a token attends only to earlier tokens of its document.
  at::Tensor forward_logits(const at::Tensor& input_ids, const at::Tensor& position_ids = {},
                            const at::Tensor& document_ids = {});
  // As forward_logits, with the router logits of the MoE layers.
  CausalLMOutput forward_with_router_logits(const at::Tensor& input_ids, const at::Tensor& position_ids = {},
                                            const at::Tensor& document_ids = {});
  // As forward_with_router_logits, but lm_head computes the next-token
  // cross-entropy at each position of `labels` ([B, T] int64,
  // nn::kIgnoredLabel where none) in place of the logits, which never exist
  // (nn/linear_cross_entropy.h; policy.fused_lm_head_loss). The whole
  // vocabulary must be on this rank (no tensor-parallel lm_head).
  // `temperature` divides the (capped) logits first: a policy's negated
  // log-probs at its sampling temperature.
  CausalLMOutput forward_token_losses(const at::Tensor& input_ids, const at::Tensor& position_ids,
                                      const at::Tensor& document_ids, const at::Tensor& labels,
                                      double temperature = 1.0);
  // The logits of final hidden states [..., hidden] (the decoder model's
  // output, after the final norm): lm_head through its hooks, then
  // final_logit_softcapping. forward() ends with it; decoding
  // (policy/generation.h) calls it on the positions it samples from only.
  at::Tensor logits_of_hidden(const at::Tensor& hidden);

  const ModelConfig& config() const { return config_; }
  const std::shared_ptr<DecoderModel>& model() const { return model_; }
  std::vector<std::shared_ptr<nn::Module>> decoder_layers() const;
  const std::shared_ptr<nn::Embedding>& embed_tokens() const { return model_->embed_tokens(); }
  const std::shared_ptr<nn::RMSNorm>& final_norm() const { return model_->norm(); }
  // Never null: when tied it is a parameter-less Linear reading the embedding.
  const std::shared_ptr<nn::Linear>& lm_head() const { return lm_head_; }
  bool tied() const { return config_.tie_word_embeddings; }
  // Alias name -> canonical name of tensors stored once ({"lm_head.weight":
  // "model.embed_tokens.weight"} when tied, empty otherwise).
  std::map<std::string, std::string> tied_parameter_names() const;

 protected:
  // {input_ids, optional position_ids, optional document_ids} -> {logits,
  // router_logits of each MoE layer...}; {input_ids, position_ids or
  // undefined, document_ids or undefined, labels} -> {the positions' losses,
  // router logits...} (forward_token_losses).
  nn::Tensors forward(const nn::Tensors& inputs) override;

 private:
  ModelConfig config_;
  std::shared_ptr<DecoderModel> model_;
  std::shared_ptr<nn::Linear> lm_head_;
};

// Creates the root (owned by a shared_ptr, as libtorch's named_modules needs)
// and assigns every module's path.
std::shared_ptr<CausalLM> make_causal_lm(ModelConfig config, std::shared_ptr<DecoderModel> model);

}  // namespace tessel::models
