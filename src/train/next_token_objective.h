// SFT's objective (SPEC 6): the mean next-token cross-entropy over the
// global batch's valid targets (labels that are not loss::kIgnoreIndex).
// Logits narrower than the vocabulary are this rank's tp slice of a
// column-parallel lm_head: the loss is then vocab-parallel cross-entropy,
// which never gathers them (loss/vocab_parallel_cross_entropy.h).
#pragma once

#include "train/step_objective.h"

namespace tessel::train {

class NextTokenObjective : public StepObjective {
 public:
  StepCounts begin(const dist::DeviceMesh& mesh, const std::vector<MicroBatch>& batches) override;
  at::Tensor micro_batch_loss(const ShardedModel& model, const dist::DeviceMesh& mesh, const at::Tensor& logits,
                              const MicroBatch& piece) override;
  // The positions' losses summed and normalised as the logits' would be.
  at::Tensor micro_batch_loss_of_head(const dist::DeviceMesh& mesh, const at::Tensor& token_losses,
                                      const MicroBatch& piece) override;
  // {"loss": the sum of every piece's cross-entropy / the global valid count
  // (0 for a batch without targets)}.
  Metrics finish(const Metrics& global_sums) override;

 private:
  int64_t valid_ = 0;
};

}  // namespace tessel::train
