#include "policy/clipped_pg_objective.h"

#include <ATen/ATen.h>

#include "policy/logprobs.h"

namespace tessel::policy {

train::StepCounts ClippedPGObjective::begin(const dist::DeviceMesh& mesh,
                                           const std::vector<train::MicroBatch>& batches) {
  const PolicyCounts counts = global_policy_counts(mesh, batches);
  global_ = {static_cast<double>(counts.valid_tokens), static_cast<double>(counts.valid_sequences)};
  return {counts.valid_tokens, counts.tokens};
}

at::Tensor ClippedPGObjective::micro_batch_loss(const train::ShardedModel& model, const dist::DeviceMesh& mesh,
                                               const at::Tensor& logits, const train::MicroBatch& piece) {
  return loss_of_logprobs(mesh, aligned_logprobs(model, logits, piece.labels, temperature_), piece);
}

at::Tensor ClippedPGObjective::micro_batch_loss_of_head(const dist::DeviceMesh& mesh, const at::Tensor& token_losses,
                                                       const train::MicroBatch& piece) {
  return loss_of_logprobs(mesh, token_losses.neg(), piece);
}

at::Tensor ClippedPGObjective::loss_of_logprobs(const dist::DeviceMesh& mesh, const at::Tensor& logprobs,
                                               const train::MicroBatch& piece) {
  ClippedPGInputs in;
  in.curr_logprobs = logprobs;
  in.prev_logprobs = token_value(piece, kPrevLogprobs);
  in.generation_logprobs = token_value(piece, kGenerationLogprobs);
  in.advantages = token_value(piece, kAdvantages);
  in.token_mask = token_value(piece, kTokenMask);
  if (options_.reference_policy_kl_penalty != 0.0) {
    in.reference_logprobs = token_value(piece, kReferenceLogprobs);
  }
  in.sample_mask = row_value(piece, kSampleMask);
  in.row_tokens = row_value(piece, kRowTokens);
  if (options_.use_importance_sampling_correction && options_.sequence_level_importance_ratios) {
    in.row_log_importance = row_value(piece, kRowLogImportance);
  }
  LossPart part = clipped_pg_loss(in, options_, global_, row_parts_of(mesh));
  for (const auto& [name, value] : part.metrics) sums().add(name, value);
  return part.loss;
}

}  // namespace tessel::policy
