#include "policy/clipped_pg_objective.h"

#include <ATen/ATen.h>

#include <cmath>

#include "policy/logprobs.h"

namespace tessel::policy {

train::StepCounts ClippedPGObjective::begin(const dist::DeviceMesh& mesh,
                                           const std::vector<train::MicroBatch>& batches) {
  int64_t valid_tokens = 0, valid_sequences = 0, tokens = 0;
  for (const auto& b : batches) {
    const at::Tensor sm = row_value(b, kSampleMask);
    valid_tokens += std::llround((token_value(b, kTokenMask) * sm.unsqueeze(1)).sum().item<double>());
    valid_sequences += std::llround(sm.sum().item<double>());
    tokens += b.num_tokens;
  }
  const auto global = train::sum_over_dp(mesh, {valid_tokens, valid_sequences, tokens});
  global_ = {static_cast<double>(global[0]), static_cast<double>(global[1])};
  return {global[0], global[2]};
}

at::Tensor ClippedPGObjective::micro_batch_loss(const train::ShardedModel& model, const dist::DeviceMesh& mesh,
                                               const at::Tensor& logits, const train::MicroBatch& piece) {
  ClippedPGInputs in;
  in.curr_logprobs = aligned_logprobs(model, logits, piece.labels, temperature_);
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
