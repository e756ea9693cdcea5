#include "policy/dpo_objective.h"

#include <ATen/ATen.h>

#include <cmath>

#include "policy/logprobs.h"

namespace tessel::policy {

train::StepCounts DpoObjective::begin(const dist::DeviceMesh& mesh, const std::vector<train::MicroBatch>& batches) {
  int64_t valid_tokens = 0, valid_sequences = 0, tokens = 0;
  for (const auto& b : batches) {
    const at::Tensor sm = row_value(b, kSampleMask);
    valid_tokens += std::llround((token_value(b, kTokenMask) * sm.unsqueeze(1)).sum().item<double>());
    valid_sequences += std::llround(sm.sum().item<double>());
    tokens += b.num_tokens;
  }
  const auto global = train::sum_over_dp(mesh, {valid_tokens, valid_sequences, tokens});
  valid_sequences_ = static_cast<double>(global[1]);
  return {global[0], global[2]};
}

at::Tensor DpoObjective::micro_batch_loss(const train::ShardedModel& model, const dist::DeviceMesh& mesh,
                                         const at::Tensor& logits, const train::MicroBatch& piece) {
  DpoInputs in;
  in.curr_logprobs = aligned_logprobs(model, logits, piece.labels, 1.0);
  in.reference_logprobs = token_value(piece, kReferenceLogprobs);
  in.token_mask = token_value(piece, kTokenMask);
  in.sample_mask = row_value(piece, kSampleMask);
  in.row_tokens = row_value(piece, kRowTokens);
  LossPart part = dpo_loss(in, options_, valid_sequences_, row_parts_of(mesh));
  for (const auto& [name, value] : part.metrics) sums().add(name, value);
  return part.loss;
}

}  // namespace tessel::policy
