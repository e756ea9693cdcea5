// ColwiseParallel: a Linear whose OUTPUT features are sharded (weight and bias
// dim 0; this rank computes its slice of the output features), or an Embedding
// sharded on its hidden dim (weight dim 1), as HF's `colwise` on an embedding.
//
// Input (input_layout, or the tag another style left on it): Replicate enters
// sharded computation, so its gradient is all-reduced in backward (Megatron
// "f") unless the producer already reduces it (a distributed Replicate, see
// activation_tags.h); Shard(d) is all-gathered first (backward reduce-scatter).
// Output: Shard(-1) stays local (colwise); Replicate all-gathers the features
// (colwise_rep / colwise_gather_output, backward keeps the local slice).
//
// packed_parts = 2 is HF's packed_colwise: a fused gate||up weight where each
// rank takes its chunk of each half, so the local output is [gate_r, up_r].
// local = true (local_colwise) shards the parameters and installs no hooks: a
// parent style does the communication.
#pragma once

#include <string>

#include "parallel/style.h"
#include "tensor/layout.h"

namespace tessel::parallel {

struct ColwiseOptions {
  tensor::Layout input_layout = tensor::Layout::replicate();
  tensor::Layout output_layout = tensor::Layout::shard(-1);
  bool use_local_output = true;
  int packed_parts = 1;
  bool local = false;
  std::string label = "ColwiseParallel";
};

class ColwiseParallel : public Style {
 public:
  explicit ColwiseParallel(ColwiseOptions options = {});
  ColwiseParallel(tensor::Layout input_layout, tensor::Layout output_layout, bool use_local_output = true);
  std::string describe() const override;
  void apply(nn::Module& module, const ApplyContext& context) const override;
  const ColwiseOptions& options() const { return options_; }

 private:
  ColwiseOptions options_;
};

}  // namespace tessel::parallel
