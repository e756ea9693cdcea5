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
  // The model's head computes the cross-entropy sum itself
  // (policy.fused_lm_head_loss: no logits; CausalLM::forward_token_losses).
  void set_fused_head(bool fused) { fused_head_ = fused; }

  StepCounts begin(const dist::DeviceMesh& mesh, const std::vector<MicroBatch>& batches) override;
  at::Tensor micro_batch_loss(const ShardedModel& model, const dist::DeviceMesh& mesh, const at::Tensor& logits,
                              const MicroBatch& piece) override;
  bool fuses_head_loss() const override { return fused_head_; }
  at::Tensor micro_batch_loss_of_head(const dist::DeviceMesh& mesh, const at::Tensor& token_losses,
                                      const MicroBatch& piece) override;
  // {"loss": the sum of every piece's cross-entropy / the global valid count
  // (0 for a batch without targets)}.
  Metrics finish(const Metrics& global_sums) override;

 private:
  int64_t valid_ = 0;
  bool fused_head_ = false;
};

}  // namespace tessel::train
