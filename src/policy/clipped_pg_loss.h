// NeMo RL's clipped policy-gradient loss (GRPO, PPO, GSPO; SPEC 11), written
// from its formulas. Per position with mask m = token_mask x sample_mask:
//
//   r   = exp(curr - prev)        sequence_level_importance_ratios: one ratio
//                                 per row, exp(mean over its tokens of curr - prev)
//   rc  = clamp(r, 1 - ratio_clip_min, 1 + ratio_clip_max)
//   pg  = max(-A r, -A rc)        and with ratio_clip_c = c, where A < 0:
//                                 min(pg, -A c)  (the dual clip)
//   w   = exp(prev - generation)  per token, or per row exp(sum of it over the
//                                 row's masked tokens); NaN and inf -> 0;
//                                 clamped to truncated_importance_sampling_ratio;
//                                 1 without use_importance_sampling_correction
//   kl  = beta v (e^d - d - 1),   d = clamp(ref - curr, -20, 20) (the k3
//                                 estimator), v = exp(curr - generation)
//                                 (no gradient; NaN/inf -> 0) with
//                                 use_on_policy_kl_approximation, else 1
//   loss = sum(w pg m) / G_tok + sum(kl m) / G_tok          token_level_loss
//        = sum over rows of sm (sum_t w pg tm / n_row) / G_seq  + the same for kl
//
// G_tok and G_seq are the valid tokens and sequences of the whole global
// batch (train::StepObjective::begin), so a piece's loss is its share of the
// step's loss and the parts add up over micro batches and ranks. Metrics,
// likewise parts of the step's value: probs_ratio and probs_ratio_clamped
// (token means of r, rc), kl_penalty (the KL term / beta), token_mult_prob_error
// (token mean of exp(|generation - prev|)), approx_entropy (token mean of
// -exp(curr - generation) curr), num_valid_samples (sum of sample_mask).
// Arithmetic in the inputs' dtype.
#pragma once

#include <ATen/core/Tensor.h>

#include "policy/loss_options.h"
#include "policy/policy_batch.h"

namespace tessel::policy {

// One piece of a batch; per-token tensors [B, T] aligned with the logits,
// per-row tensors [B].
struct ClippedPGInputs {
  at::Tensor curr_logprobs;  // differentiable: the policy being trained
  at::Tensor prev_logprobs;
  at::Tensor generation_logprobs;
  at::Tensor reference_logprobs;
  at::Tensor advantages;
  at::Tensor token_mask;
  at::Tensor sample_mask;         // [B]
  at::Tensor row_tokens;          // [B] token_mask summed over the whole row
  at::Tensor row_log_importance;  // [B] policy_batch.h; needed for sequence-level weights
};

struct GlobalCounts {
  double valid_tokens = 0;     // sum of token_mask x sample_mask over the global batch
  double valid_sequences = 0;  // sum of sample_mask over the global batch
};

LossPart clipped_pg_loss(const ClippedPGInputs& in, const ClippedPGOptions& options, const GlobalCounts& global,
                         const RowParts& rows = {});

}  // namespace tessel::policy
