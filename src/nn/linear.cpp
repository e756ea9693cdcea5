#include "nn/linear.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "nn/embedding_lookup.h"
#include "nn/linear_cross_entropy.h"
#include "nn/linear_product.h"

namespace tessel::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool bias,
               const at::TensorOptions& options)
    : Module("Linear") {
  TESSEL_CHECK(in_features > 0 && out_features > 0, "Linear sizes must be positive, got in={} out={}",
               in_features, out_features);
  register_parameter("weight", at::empty({out_features, in_features}, options));
  if (bias) register_parameter("bias", at::empty({out_features}, options));
}

std::shared_ptr<Linear> Linear::tied_to(std::shared_ptr<Module> owner, std::string name) {
  TESSEL_CHECK(owner != nullptr, "Linear::tied_to needs a module owning the weight");
  TESSEL_CHECK(owner->has_parameter(name), "Linear::tied_to: module {} has no parameter '{}'",
               owner->name(), name);
  std::shared_ptr<Linear> linear(new Linear());
  linear->owner_ = std::move(owner);
  linear->owner_param_ = std::move(name);
  return linear;
}

at::Tensor Linear::weight() const {
  return owner_ ? owner_->parameter(owner_param_) : parameter("weight");
}

at::Tensor Linear::bias() const { return has_parameter("bias") ? parameter("bias") : at::Tensor(); }

Tensors Linear::forward(const Tensors& inputs) {
  TESSEL_CHECK(inputs.size() == 1 || inputs.size() == 2,
               "Linear {} takes one input (or the input and labels, for its loss), got {}", path(), inputs.size());
  at::Tensor w = weight();
  TESSEL_CHECK(inputs[0].size(-1) == w.size(1),
               "Linear {}: input has {} features but the weight is [{}, {}]", path(),
               inputs[0].size(-1), w.size(0), w.size(1));
  if (inputs.size() == 1) return {linear_product(inputs[0], w, bias())};
  TESSEL_CHECK(!bias().defined(), "Linear {}: the cross-entropy form takes a head without bias", path());
  return {linear_cross_entropy_rows(inputs[0], w, inputs[1], kIgnoredLabel, loss_softcap_, loss_temperature_)};
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim,
                     const at::TensorOptions& options)
    : Module("Embedding") {
  TESSEL_CHECK(num_embeddings > 0 && embedding_dim > 0,
               "Embedding sizes must be positive, got {} x {}", num_embeddings, embedding_dim);
  register_parameter("weight", at::empty({num_embeddings, embedding_dim}, options));
  grad_anchor_ = at::empty({0}, at::TensorOptions().dtype(at::kFloat)).set_requires_grad(true);
}

Tensors Embedding::forward(const Tensors& inputs) {
  TESSEL_CHECK(inputs.size() == 1, "Embedding {} takes one input, got {}", path(), inputs.size());
  TESSEL_CHECK(inputs[0].scalar_type() == at::kLong || inputs[0].scalar_type() == at::kInt,
               "Embedding {} expects integer token ids, got {}", path(),
               c10::toString(inputs[0].scalar_type()));
  const at::Tensor w = weight();
  if (at::GradMode::is_enabled() && w.requires_grad()) return {embedding_with_inplace_grad(w, inputs[0], grad_anchor_)};
  return {at::embedding(w, inputs[0])};
}

}  // namespace tessel::nn
