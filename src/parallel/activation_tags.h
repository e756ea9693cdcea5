// What a style knows about an activation another style produced: its layout
// on the tp group and, for shards, the global extent. This is the little of
// DTensor's metadata the hooks need, attached to the tensor object itself:
//
// - global size: a rank cannot infer the global length of an unevenly sharded
//   dimension from its own piece, so a style that creates a shard (reduce-
//   scatter, local split) tags it and the next style that gathers reads it;
//   untagged shards cost one tiny all-gather of the local sizes instead.
// - "distributed" Replicate (DTensor's use_local_output=False): the tensor was
//   gathered by a collective whose backward already sums the partial input
//   gradients (all-gather -> reduce-scatter). Column-parallel consumers then
//   skip their own all-reduce of the input gradient, so q/k/v under sequence
//   parallelism cost one reduce-scatter in backward instead of three
//   all-reduces. Such a tensor must only be consumed by parallel styles.
//
// Tags are keyed by tensor identity (the TensorImpl, held by a weak reference,
// so an address is never reused while its entry exists) and expire with the
// tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "tensor/layout.h"

namespace tessel::parallel {

struct ActivationTag {
  tensor::Layout layout = tensor::Layout::replicate();
  int64_t global_size = -1;            // along layout.dim() for shards; -1 unknown
  bool grad_reduced_by_producer = false;  // distributed Replicate (see above)
};

void tag_activation(const at::Tensor& x, const ActivationTag& tag);
std::optional<ActivationTag> activation_tag(const at::Tensor& x);
// Live entries (for tests: tags must not accumulate).
std::size_t num_activation_tags();

}  // namespace tessel::parallel
