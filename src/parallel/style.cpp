#include "parallel/style.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "parallel/activation_tags.h"
#include "tensor/autograd_collectives.h"
#include "tensor/chunking.h"

namespace tessel::parallel {

std::string ApplyContext::param_name(const nn::Module& module, const std::string& param) {
  return module.path().empty() ? param : module.path() + "." + param;
}

namespace {
std::vector<int64_t> shape_of(const at::Tensor& t) { return std::vector<int64_t>(t.sizes().begin(), t.sizes().end()); }
}  // namespace

void ApplyContext::shard_parameter(nn::Module& module, const std::string& param, int64_t dim,
                                   const std::string& style, int packed_parts) const {
  const at::Tensor full = module.parameter(param);
  const int64_t d = dim < 0 ? dim + full.dim() : dim;
  TESSEL_CHECK(d >= 0 && d < full.dim(), "{} on {}: cannot shard parameter '{}' of shape {} along dim {}", style,
               module.path(), param, fmt::join(full.sizes(), "x"), dim);
  TpParam tp{tensor::ShardSpec(shape_of(full), {{kTpMeshDim, tensor::Layout::shard(d)}}), packed_parts, style};
  at::Tensor local = local_piece(full, tp, group->size(), group->rank());
  local.set_requires_grad(full.requires_grad());
  module.replace_parameter(param, local);
  registry->record(param_name(module, param), std::move(tp));
}

void ApplyContext::replicate_parameter(nn::Module& module, const std::string& param, const std::string& style) const {
  const at::Tensor& p = module.parameter(param);
  registry->record(param_name(module, param),
                   TpParam{tensor::ShardSpec(shape_of(p), {{kTpMeshDim, tensor::Layout::replicate()}}), 1, style});
}

namespace detail {

void all_reduce_parameter_grads(nn::Module& module, const dist::CommunicatorPtr& group) {
  // The originals of the parameters swapped for the current call.
  auto saved = std::make_shared<std::vector<std::pair<std::string, at::Tensor>>>();
  module.add_pre_hook([group, saved](nn::Module& m, nn::Tensors inputs) {
    saved->clear();
    if (!at::GradMode::is_enabled()) return inputs;
    for (const auto& item : m.named_parameters(/*recurse=*/false)) {
      const at::Tensor& p = item.value();
      if (!p.defined() || !p.requires_grad()) continue;
      saved->emplace_back(item.key(), p);
      m.replace_parameter(item.key(), tensor::copy_to_group(p, group));
    }
    return inputs;
  });
  module.add_post_hook([saved](nn::Module& m, const nn::Tensors&, nn::Tensors outputs) {
    for (auto& [name, p] : *saved) m.replace_parameter(name, p);
    saved->clear();
    return outputs;
  });
}

std::vector<int64_t> shard_sizes(const at::Tensor& x, int64_t dim, const dist::CommunicatorPtr& group) {
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  if (auto tag = activation_tag(x); tag && tag->layout.is_shard() && tag->global_size >= 0 &&
                                    tag->layout.normalized(x.dim()).dim() == d) {
    return tensor::chunk_sizes(tag->global_size, group->size());
  }
  at::Tensor mine = at::full({1}, x.size(d), at::TensorOptions().dtype(at::kLong));
  at::Tensor all = at::empty({group->size()}, mine.options());
  group->all_gather_into(all, mine);
  return std::vector<int64_t>(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + group->size());
}

void throw_wrong_module(nn::Module& module, const std::string& style, const char* what) {
  throw Error(fmt::format("style {} applies to {} modules, but module '{}' is a {}", style, what,
                          module.path().empty() ? "<root>" : module.path(), module.name()));
}

}  // namespace detail

}  // namespace tessel::parallel
