// Linear and Embedding with Hugging Face parameter names ("weight" [out, in],
// optional "bias"; "weight" [vocab, hidden]). Sizes are read from the current
// weight at every call, so a tensor-parallel shard (fewer rows or columns)
// installed with replace_parameter() works unchanged.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "nn/module.h"

namespace tessel::nn {

class Linear : public Module {
 public:
  // Parameters are allocated uninitialised (at::empty): the model's init or a
  // checkpoint load fills them.
  Linear(int64_t in_features, int64_t out_features, bool bias, const at::TensorOptions& options);

  // A Linear that owns no parameters and uses `owner`'s parameter `name` as
  // its weight (a tied lm_head reading model.embed_tokens.weight). The weight
  // is looked up at each call, so it follows replace_parameter() on the owner.
  static std::shared_ptr<Linear> tied_to(std::shared_ptr<Module> owner,
                                         std::string name = "weight");

  at::Tensor weight() const;
  at::Tensor bias() const;  // undefined when there is none
  bool is_tied() const { return owner_ != nullptr; }
  // The cap the loss form applies to the logits (CausalLM's
  // final_logit_softcapping); none by default.
  void set_loss_softcap(std::optional<double> cap) { loss_softcap_ = cap; }
  // The temperature the loss form divides the (capped) logits by: 1 unless
  // a caller sets it around a call (CausalLM::forward_token_losses, for a
  // policy's log-probs at its sampling temperature). Not a tensor input:
  // FSDP's mixed precision casts floating inputs to the compute dtype.
  void set_loss_temperature(double temperature) { loss_temperature_ = temperature; }
  double loss_temperature() const { return loss_temperature_; }

 protected:
  // {x [..., in]} -> {y [..., out]}; or, as a language-model head's loss
  // (CausalLM::forward_token_losses), {x [..., in], labels [...] int64} -> {the
  // cross-entropy of softcap(x · wᵀ) / temperature at each position, 0 where the label is
  // kIgnoredLabel}, without the logits (nn/linear_cross_entropy.h; no bias).
  Tensors forward(const Tensors& inputs) override;

 private:
  Linear() : Module("Linear") {}
  std::shared_ptr<Module> owner_;
  std::string owner_param_;
  std::optional<double> loss_softcap_;
  double loss_temperature_ = 1.0;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, const at::TensorOptions& options);
  at::Tensor weight() const { return parameter("weight"); }

 protected:
  // {ids [...] int64} -> {[..., dim]}. With grad, the weight gradient is
  // added into weight.grad in place (nn/embedding_lookup.h).
  Tensors forward(const Tensors& inputs) override;

 private:
  at::Tensor grad_anchor_;  // zero elements, requires grad: the lookup's autograd input
};

}  // namespace tessel::nn
