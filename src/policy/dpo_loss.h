// NeMo RL's DPO loss (SPEC 11), written from its formulas. Rows come in
// pairs, interleaved: chosen, rejected, chosen, ... (both of a pair in the
// same micro batch). With tm = token_mask (the response), sm = sample_mask:
//
//   reward_row = sum_t (curr - ref) tm      / max(sum_t tm, 1) with preference_average_log_probs
//   preference = sum over pairs of -logsigmoid(beta (r_chosen - r_rejected)) sm_chosen / (G_seq / 2)
//   nll_row    = -sum_t curr tm sm          / max(sum_t tm sm, 1) with sft_average_log_probs
//   sft        = sum over pairs of nll_chosen sm_chosen / (G_seq / 2)   (0 unless sft_loss_weight > 0)
//   loss       = sft_loss_weight sft + preference_loss_weight preference
//
// G_seq is the global batch's count of valid rows (sample_mask summed), so
// G_seq / 2 is its valid pairs. Metrics (parts of the step's value):
// sft_loss, preference_loss, accuracy (share of pairs whose chosen reward is
// higher), rewards_chosen_mean, rewards_rejected_mean, reward_margin (their
// difference; tessel's addition) and num_valid_samples (valid pairs).
// Rewards are sums over whole rows: under context parallelism each rank sums
// its chunks and policy_batch.h's sum_row_parts makes them whole.
#pragma once

#include <ATen/core/Tensor.h>

#include "policy/loss_options.h"
#include "policy/policy_batch.h"

namespace tessel::policy {

struct DpoInputs {
  at::Tensor curr_logprobs;       // [B, T] differentiable
  at::Tensor reference_logprobs;  // [B, T]
  at::Tensor token_mask;          // [B, T]
  at::Tensor sample_mask;         // [B]
  at::Tensor row_tokens;          // [B] token_mask summed over the whole row
};

LossPart dpo_loss(const DpoInputs& in, const DpoOptions& options, double global_valid_sequences,
                  const RowParts& rows = {});

}  // namespace tessel::policy
