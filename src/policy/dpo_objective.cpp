#include "policy/dpo_objective.h"

#include <ATen/ATen.h>

#include "policy/logprobs.h"

namespace tessel::policy {

train::StepCounts DpoObjective::begin(const dist::DeviceMesh& mesh, const std::vector<train::MicroBatch>& batches) {
  const PolicyCounts counts = global_policy_counts(mesh, batches);
  valid_sequences_ = static_cast<double>(counts.valid_sequences);
  return {counts.valid_tokens, counts.tokens};
}

at::Tensor DpoObjective::micro_batch_loss(const train::ShardedModel& model, const dist::DeviceMesh& mesh,
                                         const at::Tensor& logits, const train::MicroBatch& piece) {
  return loss_of_logprobs(mesh, aligned_logprobs(model, logits, piece.labels, 1.0), piece);
}

at::Tensor DpoObjective::micro_batch_loss_of_head(const dist::DeviceMesh& mesh, const at::Tensor& token_losses,
                                                  const train::MicroBatch& piece) {
  return loss_of_logprobs(mesh, token_losses.neg(), piece);
}

at::Tensor DpoObjective::loss_of_logprobs(const dist::DeviceMesh& mesh, const at::Tensor& logprobs,
                                          const train::MicroBatch& piece) {
  DpoInputs in;
  in.curr_logprobs = logprobs;
  in.reference_logprobs = token_value(piece, kReferenceLogprobs);
  in.token_mask = token_value(piece, kTokenMask);
  in.sample_mask = row_value(piece, kSampleMask);
  in.row_tokens = row_value(piece, kRowTokens);
  LossPart part = dpo_loss(in, options_, valid_sequences_, row_parts_of(mesh));
  for (const auto& [name, value] : part.metrics) sums().add(name, value);
  return part.loss;
}

}  // namespace tessel::policy
