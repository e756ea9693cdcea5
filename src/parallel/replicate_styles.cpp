#include "parallel/replicate_styles.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "tensor/autograd_collectives.h"

namespace tessel::parallel {

namespace detail {

namespace {
// module and its tessel descendants (module first).
std::vector<nn::Module*> subtree(nn::Module& module) {
  std::vector<nn::Module*> out{&module};
  for (const auto& child : module.modules(/*include_self=*/false)) {
    if (auto* m = dynamic_cast<nn::Module*>(child.get())) out.push_back(m);
  }
  return out;
}
}  // namespace

void record_replicated_subtree(nn::Module& module, const ApplyContext& ctx, const std::string& style) {
  for (nn::Module* m : subtree(module)) {
    for (const auto& item : m->named_parameters(/*recurse=*/false)) ctx.replicate_parameter(*m, item.key(), style);
  }
}

void all_reduce_parameter_grads_subtree(nn::Module& module, const dist::CommunicatorPtr& group) {
  for (nn::Module* m : subtree(module)) {
    if (!m->named_parameters(/*recurse=*/false).is_empty()) all_reduce_parameter_grads(*m, group);
  }
}

}  // namespace detail

ReplicateParallel::ReplicateParallel(bool grad_all_reduce, std::string label)
    : grad_all_reduce_(grad_all_reduce), label_(std::move(label)) {}

std::string ReplicateParallel::describe() const {
  return fmt::format("{}({})", label_, grad_all_reduce_ ? "gradients all-reduced over tp" : "no communication");
}

void ReplicateParallel::apply(nn::Module& module, const ApplyContext& ctx) const {
  detail::record_replicated_subtree(module, ctx, label_);
  if (grad_all_reduce_) detail::all_reduce_parameter_grads_subtree(module, ctx.group);
}

void GatherParallel::apply(nn::Module& module, const ApplyContext& ctx) const {
  const auto group = ctx.group;
  module.add_post_hook([group](nn::Module&, const nn::Tensors&, nn::Tensors outputs) {
    outputs.at(0) = tensor::reduce_from_group(outputs.at(0), group);
    return outputs;
  });
}

void IsolatedParallel::apply(nn::Module& module, const ApplyContext& ctx) const {
  detail::record_replicated_subtree(module, ctx, "IsolatedParallel");
}

}  // namespace tessel::parallel
