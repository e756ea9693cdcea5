// The clipped policy-gradient loss (policy/clipped_pg_loss.h) as the
// objective of a training step (train/step_objective.h): GRPO's update on a
// batch of rollouts. Each micro batch carries, aligned with its labels, the
// token_mask, advantages and the previous, generation and reference
// log-probs, and per row the sample_mask and the whole-row values
// (policy_batch.h, add_whole_row_values). begin() all-reduces the global
// valid tokens and sequences over dp before any forward; the current
// log-probs come from the logits (divided by the generation temperature, as
// the sampler saw them) through policy/token_logprobs.h, vocab-parallel under
// tensor parallelism; or, with the fused head (policy.fused_lm_head_loss),
// from the head's per-position losses at that temperature, no logits made.
#pragma once

#include "policy/clipped_pg_loss.h"
#include "train/step_objective.h"

namespace tessel::policy {

class ClippedPGObjective : public train::StepObjective {
 public:
  explicit ClippedPGObjective(ClippedPGOptions options, double temperature = 1.0)
      : options_(options), temperature_(temperature) {}

  train::StepCounts begin(const dist::DeviceMesh& mesh, const std::vector<train::MicroBatch>& batches) override;
  at::Tensor micro_batch_loss(const train::ShardedModel& model, const dist::DeviceMesh& mesh, const at::Tensor& logits,
                              const train::MicroBatch& piece) override;
  // The log-probs are the negated losses of the positions.
  at::Tensor micro_batch_loss_of_head(const dist::DeviceMesh& mesh, const at::Tensor& token_losses,
                                      const train::MicroBatch& piece) override;
  double head_loss_temperature() const override { return temperature_; }

 private:
  // The loss from the current log-probs [B, T] aligned with piece.labels.
  at::Tensor loss_of_logprobs(const dist::DeviceMesh& mesh, const at::Tensor& logprobs, const train::MicroBatch& piece);

  ClippedPGOptions options_;
  double temperature_;
  GlobalCounts global_;
};

}  // namespace tessel::policy
