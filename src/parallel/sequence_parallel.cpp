#include "parallel/sequence_parallel.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "parallel/activation_tags.h"
#include "parallel/replicate_styles.h"
#include "tensor/autograd_collectives.h"

namespace tessel::parallel {

using tensor::Layout;

SequenceParallel::SequenceParallel(int64_t sequence_dim, std::string label)
    : sequence_dim_(sequence_dim), label_(std::move(label)) {}

std::string SequenceParallel::describe() const { return fmt::format("{}(sequence_dim={})", label_, sequence_dim_); }

void SequenceParallel::apply(nn::Module& module, const ApplyContext& ctx) const {
  detail::record_replicated_subtree(module, ctx, label_);
  detail::all_reduce_parameter_grads_subtree(module, ctx.group);
  const auto group = ctx.group;
  const int64_t seq = sequence_dim_;
  // The global sequence length of the current call, when the input told it.
  auto global = std::make_shared<int64_t>(-1);
  module.add_pre_hook([group, seq, global](nn::Module&, nn::Tensors inputs) {
    TESSEL_CHECK(!inputs.empty(), "SequenceParallel: the module got no inputs");
    at::Tensor& x = inputs[0];
    const int64_t d = seq < 0 ? seq + x.dim() : seq;
    *global = -1;
    auto tag = activation_tag(x);
    if (tag && tag->layout.is_replicate()) {
      *global = x.size(d);
      x = tensor::split_along(x, d, group);
    } else if (tag && tag->layout.is_shard() && tag->layout.normalized(x.dim()).dim() == d) {
      *global = tag->global_size;
    }
    return inputs;
  });
  module.add_post_hook([seq, global](nn::Module&, const nn::Tensors&, nn::Tensors outputs) {
    at::Tensor& y = outputs.at(0);
    const int64_t d = seq < 0 ? seq + y.dim() : seq;
    if (*global >= 0) tag_activation(y, ActivationTag{Layout::shard(d), *global, false});
    return outputs;
  });
}

}  // namespace tessel::parallel
