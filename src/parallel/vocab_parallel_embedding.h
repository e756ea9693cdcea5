// VocabParallelEmbedding: the embedding table sharded by vocabulary rows
// (weight dim 0, torch.chunk ranges). Each rank looks up only the ids in its
// range (others give zeros), so the outputs are partial sums: all-reduced to
// Replicate, or reduce-scattered to sequence shards (Shard(1)) under sequence
// parallelism. HF's `embedding_rowwise`, and `rowwise` / `rowwise_rep` on an
// embedding. Token ids arrive replicated (input_layout Replicate); Shard(d)
// ids are gathered first. Every rank must hold at least one row.
#pragma once

#include <string>

#include "parallel/style.h"
#include "tensor/layout.h"

namespace tessel::parallel {

class VocabParallelEmbedding : public Style {
 public:
  explicit VocabParallelEmbedding(tensor::Layout input_layout = tensor::Layout::replicate(),
                                  tensor::Layout output_layout = tensor::Layout::replicate(),
                                  std::string label = "VocabParallelEmbedding");
  std::string describe() const override;
  void apply(nn::Module& module, const ApplyContext& context) const override;

 private:
  tensor::Layout input_layout_, output_layout_;
  std::string label_;
};

}  // namespace tessel::parallel
