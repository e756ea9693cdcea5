#include "parallel/rowwise.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "nn/linear.h"
#include "parallel/activation_tags.h"
#include "parallel/vocab_parallel_embedding.h"
#include "tensor/autograd_collectives.h"
#include "tensor/chunking.h"
#include "tensor/redistribute.h"

namespace tessel::parallel {

using tensor::Layout;

RowwiseParallel::RowwiseParallel(RowwiseOptions options) : options_(std::move(options)) {
  TESSEL_CHECK(options_.packed_parts >= 1, "RowwiseParallel: packed_parts must be >= 1");
}

RowwiseParallel::RowwiseParallel(Layout input_layout, Layout output_layout, bool use_local_output)
    : RowwiseParallel(RowwiseOptions{input_layout, output_layout, use_local_output}) {}

std::string RowwiseParallel::describe() const {
  if (options_.local) return fmt::format("{}(local, no communication)", options_.label);
  return fmt::format("{}(input={}, output={}{})", options_.label, options_.input_layout.to_string(),
                     options_.output_layout.to_string(),
                     options_.packed_parts > 1 ? fmt::format(", packed x{}", options_.packed_parts) : "");
}

namespace {

// This rank's input features of a replicated x: chunk r of each packed part.
at::Tensor split_features(const at::Tensor& x, int parts, const dist::CommunicatorPtr& group) {
  if (parts == 1) return tensor::split_along(x, -1, group);
  const int64_t part = x.size(-1) / parts;
  TESSEL_CHECK(part * parts == x.size(-1), "packed input of {} features is not {} equal parts", x.size(-1), parts);
  std::vector<at::Tensor> pieces;
  for (int k = 0; k < parts; ++k) pieces.push_back(tensor::split_along(x.narrow(-1, k * part, part), -1, group));
  return at::cat(pieces, -1);
}

}  // namespace

void RowwiseParallel::apply(nn::Module& module, const ApplyContext& ctx) const {
  const RowwiseOptions o = options_;
  if (dynamic_cast<nn::Embedding*>(&module) != nullptr) {
    TESSEL_CHECK(o.packed_parts == 1 && !o.local, "{} on embedding '{}': only the vocab-parallel form applies",
                 o.label, module.path());
    const Layout ids = o.input_layout.is_shard() && o.input_layout.dim() == -1 ? Layout::replicate() : o.input_layout;
    VocabParallelEmbedding(ids, o.output_layout, o.label).apply(module, ctx);
    return;
  }
  auto& linear = detail::expect_module<nn::Linear>(module, o.label, "Linear or Embedding");
  TESSEL_CHECK(!linear.is_tied(), "{} on '{}': its weight is tied to another module's (vocab rows); a tied head "
               "can only be column-parallel", o.label, module.path());
  const int64_t global_in = linear.weight().size(1);
  ctx.shard_parameter(module, "weight", 1, o.label, o.packed_parts);
  if (module.has_parameter("bias")) ctx.replicate_parameter(module, "bias", o.label);

  const auto group = ctx.group;
  if (!o.local) {
    module.add_pre_hook([group, o, global_in](nn::Module& m, nn::Tensors inputs) {
      TESSEL_CHECK(!inputs.empty(), "{}: the module got no inputs", o.label);
      at::Tensor& x = inputs[0];
      auto tag = activation_tag(x);
      const Layout from = (tag ? tag->layout : o.input_layout).normalized(x.dim());
      const int64_t last = x.dim() - 1;
      if (from.is_replicate()) {
        x = split_features(x, o.packed_parts, group);
      } else if (from.is_shard() && from.dim() != last) {
        const int64_t global = tag && tag->global_size >= 0 ? tag->global_size : [&] {
          int64_t n = 0;
          for (int64_t s : detail::shard_sizes(x, from.dim(), group)) n += s;
          return n;
        }();
        TESSEL_CHECK(o.packed_parts == 1, "{}: a packed input must arrive replicated or feature-sharded", o.label);
        x = tensor::redistribute(x, from, Layout::shard(last), group, global);
      } else if (from.is_partial()) {
        throw Error(fmt::format("{} on '{}': input layout Partial is not supported (reduce it first with "
                                "PrepareModuleInput)", o.label, m.path()));
      }
      (void)global_in;
      return inputs;
    });
  }
  module.add_post_hook([group, o](nn::Module& m, const nn::Tensors&, nn::Tensors outputs) {
    at::Tensor& y = outputs.at(0);
    if (m.has_parameter("bias") && group->rank() != 0) y = y - m.parameter("bias").detach();
    if (o.local) return outputs;
    const Layout to = o.output_layout.normalized(y.dim());
    if (to.is_replicate()) {
      y = tensor::reduce_from_group(y, group);
    } else if (to.is_shard()) {
      const int64_t extent = y.size(to.dim());
      y = tensor::reduce_scatter_along(y, to.dim(), group);
      tag_activation(y, ActivationTag{to, extent, false});
    }  // Partial: left for the consumer to reduce
    return outputs;
  });
}

}  // namespace tessel::parallel
