// The DPO loss (policy/dpo_loss.h) as the objective of a training step
// (train/step_objective.h). Each micro batch holds whole pairs, chosen and
// rejected interleaved, with the token_mask of the responses and the
// reference policy's log-probs aligned with its labels, and per row the
// sample_mask and row_tokens (policy_batch.h). begin() all-reduces the
// global valid sequences over dp before any forward.
#pragma once

#include "policy/dpo_loss.h"
#include "train/step_objective.h"

namespace tessel::policy {

class DpoObjective : public train::StepObjective {
 public:
  explicit DpoObjective(DpoOptions options) : options_(options) {}

  train::StepCounts begin(const dist::DeviceMesh& mesh, const std::vector<train::MicroBatch>& batches) override;
  at::Tensor micro_batch_loss(const train::ShardedModel& model, const dist::DeviceMesh& mesh, const at::Tensor& logits,
                              const train::MicroBatch& piece) override;
  // The log-probs are the negated losses of the positions.
  at::Tensor micro_batch_loss_of_head(const dist::DeviceMesh& mesh, const at::Tensor& token_losses,
                                      const train::MicroBatch& piece) override;

 private:
  // The piece's loss from the policy's log-probs of its labels [rows, positions].
  at::Tensor loss_of_logprobs(const dist::DeviceMesh& mesh, const at::Tensor& logprobs, const train::MicroBatch& piece);

  DpoOptions options_;
  double valid_sequences_ = 0;
};

}  // namespace tessel::policy
