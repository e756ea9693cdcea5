#include "parallel/vocab_parallel_embedding.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "nn/linear.h"
#include "parallel/activation_tags.h"
#include "tensor/autograd_collectives.h"
#include "tensor/chunking.h"
#include "tensor/dim_collectives.h"

namespace tessel::parallel {

using tensor::Layout;

VocabParallelEmbedding::VocabParallelEmbedding(Layout input_layout, Layout output_layout, std::string label)
    : input_layout_(input_layout), output_layout_(output_layout), label_(std::move(label)) {
  TESSEL_CHECK(!output_layout_.is_partial(), "{}: output layout Partial is not supported; use Replicate or "
               "Shard(1)", label_);
}

std::string VocabParallelEmbedding::describe() const {
  return fmt::format("{}(input={}, output={})", label_, input_layout_.to_string(), output_layout_.to_string());
}

void VocabParallelEmbedding::apply(nn::Module& module, const ApplyContext& ctx) const {
  detail::expect_module<nn::Embedding>(module, label_, "Embedding");
  const int64_t vocab = module.parameter("weight").size(0);
  const int world = ctx.group->size(), rank = ctx.group->rank();
  const int64_t offset = tensor::chunk_offset(vocab, world, rank);
  const int64_t rows = tensor::chunk_size(vocab, world, rank);
  TESSEL_CHECK(rows > 0, "{} on '{}': a vocabulary of {} rows leaves tp rank {} of {} without rows; use a smaller "
               "tp size or do not shard the embedding", label_, module.path(), vocab, rank, world);
  ctx.shard_parameter(module, "weight", 0, label_);

  // The mask of the ids outside this rank's rows, from the pre-hook to the
  // post-hook of the same call.
  auto mask = std::make_shared<at::Tensor>();
  const auto group = ctx.group;
  const Layout in = input_layout_, out = output_layout_;
  const std::string label = label_;
  module.add_pre_hook([=](nn::Module&, nn::Tensors inputs) {
    TESSEL_CHECK(inputs.size() == 1, "{}: expected one input (token ids), got {}", label, inputs.size());
    at::Tensor ids = inputs[0];
    const Layout from = in.normalized(ids.dim());
    if (from.is_shard()) {
      ids = tensor::all_gather_dim(ids.contiguous(), from.dim(), *group, detail::shard_sizes(ids, from.dim(), group));
    }
    *mask = (ids < offset).logical_or(ids >= offset + rows);
    inputs[0] = (ids - offset).masked_fill(*mask, 0);
    return inputs;
  });
  module.add_post_hook([=](nn::Module&, const nn::Tensors&, nn::Tensors outputs) {
    at::Tensor& y = outputs.at(0);
    y = y.masked_fill(mask->unsqueeze(-1), 0);  // partial: each id is found on one rank
    *mask = at::Tensor();
    const Layout to = out.normalized(y.dim());
    if (to.is_replicate()) {
      y = tensor::reduce_from_group(y, group);
    } else {
      const int64_t extent = y.size(to.dim());
      y = tensor::reduce_scatter_along(y, to.dim(), group);
      tag_activation(y, ActivationTag{to, extent, false});
    }
    return outputs;
  });
}

}  // namespace tessel::parallel
