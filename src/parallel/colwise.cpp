#include "parallel/colwise.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "nn/linear.h"
#include "parallel/activation_tags.h"
#include "tensor/autograd_collectives.h"
#include "tensor/chunking.h"
#include "tensor/redistribute.h"

namespace tessel::parallel {

using tensor::Layout;

ColwiseParallel::ColwiseParallel(ColwiseOptions options) : options_(std::move(options)) {
  TESSEL_CHECK(options_.packed_parts >= 1, "ColwiseParallel: packed_parts must be >= 1");
  TESSEL_CHECK(options_.packed_parts == 1 || options_.output_layout == Layout::shard(-1),
               "{}: a packed output can only stay local (Shard(-1)); its halves are interleaved by rank",
               options_.label);
}

ColwiseParallel::ColwiseParallel(Layout input_layout, Layout output_layout, bool use_local_output)
    : ColwiseParallel(ColwiseOptions{input_layout, output_layout, use_local_output}) {}

std::string ColwiseParallel::describe() const {
  if (options_.local) return fmt::format("{}(local, no communication)", options_.label);
  return fmt::format("{}(input={}, output={}{}{})", options_.label, options_.input_layout.to_string(),
                     options_.output_layout.to_string(), options_.use_local_output ? "" : ", distributed output",
                     options_.packed_parts > 1 ? fmt::format(", packed x{}", options_.packed_parts) : "");
}

namespace {

// Input 0 as a replicated tensor ready for sharded computation.
at::Tensor prepare_colwise_input(const at::Tensor& x, const Layout& declared, const dist::CommunicatorPtr& group,
                                 bool differentiable) {
  auto tag = activation_tag(x);
  const Layout from = (tag ? tag->layout : declared).normalized(x.dim());
  if (from.is_shard()) {
    const std::vector<int64_t> sizes = detail::shard_sizes(x, from.dim(), group);
    return tensor::all_gather_along_reduce_grad(x, from.dim(), group, sizes);
  }
  if (!differentiable) return from.is_partial() ? tensor::reduce_from_group(x, group) : x;
  if (from.is_partial()) return tensor::copy_to_group(tensor::reduce_from_group(x, group), group);
  if (tag && tag->grad_reduced_by_producer) return x;
  return tensor::copy_to_group(x, group);
}

}  // namespace

void ColwiseParallel::apply(nn::Module& module, const ApplyContext& ctx) const {
  const std::string& label = options_.label;
  int64_t global_out = 0;
  bool differentiable = true;
  if (auto* linear = dynamic_cast<nn::Linear*>(&module)) {
    if (linear->is_tied()) {
      // The weight belongs to another module (a tied lm_head reads the
      // embedding): it must already be sharded the same way, by that module.
      const std::string alias = ApplyContext::param_name(module, "weight");
      auto it = ctx.tied.find(alias);
      TESSEL_CHECK(it != ctx.tied.end(), "{} on '{}': the Linear reads another module's weight, but no tied "
                   "parameter name is known for '{}'", label, module.path(), alias);
      const std::string& canonical = it->second;
      TESSEL_CHECK(ctx.registry->contains(canonical) && ctx.registry->at(canonical).spec.is_sharded() &&
                       ctx.registry->at(canonical).spec.placements()[0].layout == Layout::shard(0) &&
                       options_.packed_parts == 1,
                   "{} on '{}': its weight is tied to '{}', which must be vocab-sharded (dim 0) as well; give the "
                   "embedding a vocab-parallel style (embedding_rowwise / rowwise / VocabParallelEmbedding) in the "
                   "same plan, or untie the embeddings", label, module.path(), canonical);
      const TpParam tied = ctx.registry->at(canonical);
      ctx.registry->record(alias, TpParam{tied.spec, 1, label + " (tied to " + canonical + ")"});
      global_out = tied.spec.global_shape()[0];
    } else {
      global_out = linear->weight().size(0);
      ctx.shard_parameter(module, "weight", 0, label, options_.packed_parts);
    }
    if (module.has_parameter("bias")) ctx.shard_parameter(module, "bias", 0, label, options_.packed_parts);
  } else if (dynamic_cast<nn::Embedding*>(&module) != nullptr) {
    TESSEL_CHECK(options_.packed_parts == 1, "{} on embedding '{}': packed sharding applies to Linears only", label,
                 module.path());
    global_out = module.parameter("weight").size(1);
    ctx.shard_parameter(module, "weight", 1, label);
    differentiable = false;  // token ids
  } else {
    detail::throw_wrong_module(module, label, "Linear or Embedding");
  }
  if (options_.local) return;

  const auto group = ctx.group;
  const ColwiseOptions o = options_;
  module.add_pre_hook([group, o, differentiable](nn::Module&, nn::Tensors inputs) {
    TESSEL_CHECK(!inputs.empty(), "{}: the module got no inputs", o.label);
    inputs[0] = prepare_colwise_input(inputs[0], o.input_layout, group, differentiable);
    return inputs;
  });
  module.add_post_hook([group, o, global_out](nn::Module&, const nn::Tensors&, nn::Tensors outputs) {
    at::Tensor& y = outputs.at(0);
    const Layout to = o.output_layout.normalized(y.dim());
    const int64_t last = y.dim() - 1;
    if (to.is_shard() && to.dim() == last) {
      // A packed output interleaves halves by rank: no single global extent.
      tag_activation(y, ActivationTag{Layout::shard(-1), o.packed_parts == 1 ? global_out : -1, false});
    } else if (to.is_replicate()) {
      const auto sizes = tensor::chunk_sizes(global_out, group->size());
      if (o.use_local_output) {
        y = tensor::all_gather_along(y, last, group, sizes);
      } else {
        y = tensor::all_gather_along_reduce_grad(y, last, group, sizes);
        tag_activation(y, ActivationTag{Layout::replicate(), -1, true});
      }
    } else if (to.is_shard()) {
      const int64_t extent = y.size(to.dim());
      y = tensor::redistribute(y, Layout::shard(last), to, group, global_out);
      tag_activation(y, ActivationTag{to, extent, false});
    } else {
      throw Error(fmt::format("{}: output layout Partial is not produced by a column-parallel module; use "
                              "Shard(-1) or Replicate", o.label));
    }
    return outputs;
  });
}

}  // namespace tessel::parallel
