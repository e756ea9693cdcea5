#include "models/causal_lm.h"

#include <ATen/ATen.h>

#include <cmath>

#include "core/error.h"

namespace tessel::models {

DecoderModel::DecoderModel(Parts parts)
    : nn::Module("DecoderModel"),
      rotaries_(std::move(parts.rotaries)),
      layer_rotary_(std::move(parts.layer_rotary)),
      embed_scale_(parts.embed_scale) {
  TESSEL_CHECK(parts.embed_tokens && parts.norm, "DecoderModel needs embed_tokens and norm");
  TESSEL_CHECK(layer_rotary_.size() == parts.layers.size(),
               "DecoderModel: {} layers but {} rotary assignments", parts.layers.size(),
               layer_rotary_.size());
  for (std::size_t r : layer_rotary_) {
    TESSEL_CHECK(r < rotaries_.size(), "DecoderModel: rotary index {} out of {} schedules", r,
                 rotaries_.size());
  }
  // Registration order = HF's: embed_tokens, layers, norm.
  embed_tokens_ = register_module("embed_tokens", parts.embed_tokens);
  layers_ = register_module("layers", std::make_shared<nn::ModuleList>());
  for (auto& layer : parts.layers) layers_->push_back(layer);
  norm_ = register_module("norm", parts.norm);
}

const nn::RotaryEmbedding& DecoderModel::rotary_of_layer(std::size_t layer) const {
  return rotaries_.at(layer_rotary_.at(layer));
}

nn::Tensors DecoderModel::forward(const nn::Tensors& inputs) {
  TESSEL_CHECK(!inputs.empty() && inputs.size() <= 3,
               "model takes {{input_ids[, position_ids[, document_ids]]}}, got {} inputs",
               inputs.size());
  const at::Tensor& ids = inputs[0];
  TESSEL_CHECK(ids.dim() == 2, "input_ids must be [batch, seq], got {} dims", ids.dim());
  const int64_t B = ids.size(0), T = ids.size(1);
  at::Tensor pos = inputs.size() > 1 ? inputs[1] : at::Tensor();
  if (!pos.defined()) pos = at::arange(T, ids.options().dtype(at::kLong));
  if (pos.dim() == 1) pos = pos.unsqueeze(0);
  TESSEL_CHECK(pos.dim() == 2 && pos.size(1) == T && (pos.size(0) == 1 || pos.size(0) == B),
               "position_ids must be [batch, seq] or [seq] matching input_ids [{}, {}]", B, T);
  pos = pos.to(ids.device()).expand({B, T});
  at::Tensor documents = inputs.size() > 2 ? inputs[2] : at::Tensor();
  if (documents.defined()) {
    TESSEL_CHECK(documents.dim() == 2 && documents.size(0) == B && documents.size(1) == T &&
                     !at::isFloatingType(documents.scalar_type()),
                 "document_ids must be integer [batch, seq] matching input_ids [{}, {}]", B, T);
    // Left where they are: attention reads host ids' runs (nn/document_runs.h)
    // and moves them itself where it needs them as a mask.
  }

  at::Tensor h = embed_tokens_->call(ids);
  if (embed_scale_) {
    // Gemma: the scale is rounded to the activation dtype first (bf16: 33.94 -> 34).
    h = h * at::scalar_tensor(*embed_scale_, h.options().dtype(at::kFloat)).to(h.scalar_type());
  }
  std::vector<std::optional<std::pair<at::Tensor, at::Tensor>>> cos_sin(rotaries_.size());
  std::vector<at::Tensor> router_logits;
  for (std::size_t i = 0; i < layers_->size(); ++i) {
    auto& cs = cos_sin[layer_rotary_[i]];
    if (!cs) cs = rotaries_[layer_rotary_[i]].cos_sin(pos, h.scalar_type());
    nn::Tensors layer_in{h, cs->first, cs->second};
    if (documents.defined()) layer_in.push_back(documents);
    nn::Tensors out = (*layers_)[i]->call(std::move(layer_in));
    TESSEL_CHECK(out.size() == 1 || out.size() == 2,
                 "decoder layer {} returned {} outputs, expected {{hidden[, router_logits]}}", i, out.size());
    h = out[0];
    if (out.size() == 2) router_logits.push_back(out[1]);
  }
  nn::Tensors result{norm_->call(h)};
  result.insert(result.end(), router_logits.begin(), router_logits.end());
  return result;
}

CausalLM::CausalLM(ModelConfig config, std::shared_ptr<DecoderModel> model)
    : nn::Module(config.architecture), config_(std::move(config)) {
  TESSEL_CHECK(model != nullptr, "CausalLM needs a model");
  model_ = register_module("model", std::move(model));
  if (config_.tie_word_embeddings) {
    lm_head_ = register_module("lm_head", nn::Linear::tied_to(model_->embed_tokens()));
  } else {
    const at::Tensor& e = model_->embed_tokens()->weight();
    lm_head_ = register_module(
        "lm_head", std::make_shared<nn::Linear>(config_.hidden_size, config_.vocab_size, false,
                                                e.options()));
  }
  lm_head_->set_loss_softcap(config_.final_logit_softcapping);
}

at::Tensor CausalLM::forward_logits(const at::Tensor& input_ids, const at::Tensor& position_ids,
                                    const at::Tensor& document_ids) {
  return forward_with_router_logits(input_ids, position_ids, document_ids).logits;
}

namespace {

// {input_ids, optional position_ids, optional document_ids} as the decoder
// model takes them: an undefined position_ids holds the place when only
// document_ids is given.
nn::Tensors decoder_inputs(const at::Tensor& input_ids, const at::Tensor& position_ids,
                           const at::Tensor& document_ids) {
  nn::Tensors in{input_ids};
  if (position_ids.defined() || document_ids.defined()) in.push_back(position_ids);
  if (document_ids.defined()) in.push_back(document_ids);
  return in;
}

}  // namespace

CausalLMOutput CausalLM::forward_with_router_logits(const at::Tensor& input_ids, const at::Tensor& position_ids,
                                                    const at::Tensor& document_ids) {
  nn::Tensors out = call(decoder_inputs(input_ids, position_ids, document_ids));
  TESSEL_CHECK(!out.empty(), "model returned no outputs, expected the logits first");
  return CausalLMOutput{out[0], nn::Tensors(out.begin() + 1, out.end())};
}

CausalLMOutput CausalLM::forward_token_losses(const at::Tensor& input_ids, const at::Tensor& position_ids,
                                              const at::Tensor& document_ids, const at::Tensor& labels,
                                              double temperature) {
  TESSEL_CHECK(labels.defined() && labels.sizes() == input_ids.sizes(),
               "forward_token_losses: labels must have the shape of input_ids");
  // Set for this call only; restored however the call ends.
  struct TemperatureScope {
    nn::Linear& head;
    double before;
    ~TemperatureScope() { head.set_loss_temperature(before); }
  } scope{*lm_head_, lm_head_->loss_temperature()};
  lm_head_->set_loss_temperature(temperature);
  nn::Tensors out = call({input_ids, position_ids, document_ids, labels});
  TESSEL_CHECK(!out.empty(), "model returned no outputs, expected the positions' losses first");
  return CausalLMOutput{at::Tensor(), nn::Tensors(out.begin() + 1, out.end()), out[0]};
}

at::Tensor CausalLM::logits_of_hidden(const at::Tensor& hidden) {
  at::Tensor logits = lm_head_->call(hidden);
  if (config_.final_logit_softcapping) {
    const double cap = *config_.final_logit_softcapping;
    logits = at::tanh(logits / cap) * cap;
  }
  return logits;
}

nn::Tensors CausalLM::forward(const nn::Tensors& inputs) {
  if (inputs.size() == 4) {  // forward_token_losses: the positions' losses instead of the logits
    nn::Tensors out = model_->call(decoder_inputs(inputs[0], inputs[1], inputs[2]));
    out[0] = lm_head_->call({out[0], inputs[3]}).at(0);
    return out;
  }
  nn::Tensors out = model_->call(inputs);
  out[0] = logits_of_hidden(out[0]);  // the router logits after it pass through
  return out;
}

std::shared_ptr<CausalLM> make_causal_lm(ModelConfig config, std::shared_ptr<DecoderModel> model) {
  auto lm = std::make_shared<CausalLM>(std::move(config), std::move(model));
  nn::assign_module_paths(*lm);
  return lm;
}

std::vector<std::shared_ptr<nn::Module>> CausalLM::decoder_layers() const {
  return model_->layers()->items();
}

std::map<std::string, std::string> CausalLM::tied_parameter_names() const {
  if (!tied()) return {};
  return {{"lm_head.weight", "model.embed_tokens.weight"}};
}

}  // namespace tessel::models
