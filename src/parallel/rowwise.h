// RowwiseParallel: a Linear whose INPUT features are sharded (weight dim 1);
// each rank's output is a partial sum, all-reduced to Replicate (rowwise) or
// reduce-scattered to Shard(d) (the sequence shards of sequence parallelism).
// The bias stays replicated and is counted once: ranks other than 0 subtract
// its value before the sum, so its gradient is the full one on every rank.
//
// Input: Shard(-1) (the local features a colwise module produced) is used as
// is; Replicate is split locally (rowwise_rep / rowwise_split_input, backward
// all-gathers the input gradient). On an Embedding, rowwise means the vocab-
// parallel embedding (vocab_parallel_embedding.h).
//
// packed_parts = 2 is HF's packed_rowwise (a fused weight split per half);
// local = true (local_rowwise, local_packed_rowwise) shards the parameters and
// leaves the partial output for a parent style to reduce.
#pragma once

#include <string>

#include "parallel/style.h"
#include "tensor/layout.h"

namespace tessel::parallel {

struct RowwiseOptions {
  tensor::Layout input_layout = tensor::Layout::shard(-1);
  tensor::Layout output_layout = tensor::Layout::replicate();
  bool use_local_output = true;
  int packed_parts = 1;
  bool local = false;
  std::string label = "RowwiseParallel";
};

class RowwiseParallel : public Style {
 public:
  explicit RowwiseParallel(RowwiseOptions options = {});
  RowwiseParallel(tensor::Layout input_layout, tensor::Layout output_layout, bool use_local_output = true);
  std::string describe() const override;
  void apply(nn::Module& module, const ApplyContext& context) const override;
  const RowwiseOptions& options() const { return options_; }

 private:
  RowwiseOptions options_;
};

}  // namespace tessel::parallel
