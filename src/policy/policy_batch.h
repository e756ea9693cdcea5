// What a micro batch carries for the policy losses (SPEC 11), beside its
// tokens: the names of its per-token and per-row values
// (train::MicroBatch::token_values / row_values), and how a loss sees rows
// that context parallelism cut into chunks.
//
// Per-token values are aligned with the labels: position t holds the values
// of token t + 1 (its log-probs, advantage, mask), the token the logits at t
// predict. (NeMo RL keeps them by token and drops column 0 in the loss; the
// alignment here is that shift, done once when the batch is made.)
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "train/train_step.h"

namespace tessel::policy {

// token_values keys, [B, T] each.
inline constexpr const char* kTokenMask = "token_mask";  // 1 where the token counts (the response)
inline constexpr const char* kPrevLogprobs = "prev_logprobs";  // the policy before this step's updates
inline constexpr const char* kGenerationLogprobs = "generation_logprobs";  // what the sampler saw
inline constexpr const char* kReferenceLogprobs = "reference_policy_logprobs";
inline constexpr const char* kAdvantages = "advantages";
// row_values keys, [B] each.
inline constexpr const char* kSampleMask = "sample_mask";  // 0 drops the whole row
inline constexpr const char* kRowTokens = "row_tokens";    // sum of token_mask over the whole row
// sum over the whole row of (prev - generation) * token_mask * sample_mask:
// the log of the sequence-level importance weight.
inline constexpr const char* kRowLogImportance = "row_log_importance";

// Computes the per-row values above from the batch's whole rows (before
// context parallelism cuts them): row_tokens always, row_log_importance
// when the batch has previous and generation log-probs.
void add_whole_row_values(train::MicroBatch& batch);

// The values a loss reads, checked present with the batch's shape: a clear
// error naming what is missing instead of a shape error inside the loss.
at::Tensor token_value(const train::MicroBatch& batch, const char* name);
at::Tensor row_value(const train::MicroBatch& batch, const char* name);

// What the policy losses divide by, over the global batch: the valid tokens
// (token_mask x sample_mask) and sequences (sample_mask) of this rank's whole
// micro batches and their real tokens, summed over dp (one all-reduce).
struct PolicyCounts {
  int64_t valid_tokens = 0;
  int64_t valid_sequences = 0;
  int64_t tokens = 0;
};
PolicyCounts global_policy_counts(const dist::DeviceMesh& mesh, const std::vector<train::MicroBatch>& batches);

// Rows possibly cut over context parallelism: the group holding the other
// parts of each row (null or size 1: rows are whole here) and whether this
// rank counts quantities of whole rows (cp rank 0 does, once per row).
struct RowParts {
  dist::CommunicatorPtr group;
  bool counts_rows = true;
};
RowParts row_parts_of(const dist::DeviceMesh& mesh);

// Per-row sums of this rank's part of each row, made whole: an all-reduce
// over the group whose gradient is all-reduced too (each rank's loss uses the
// whole sum with its own tokens, so its gradient is partial).
at::Tensor sum_row_parts(const at::Tensor& partial, const RowParts& parts);

// A loss's part from one micro batch piece: the differentiable loss (already
// divided by the global counts) and its metric contributions, "loss" first,
// as float64 scalar tensors where they were computed (policy/metric_tensor.h).
struct LossPart {
  at::Tensor loss;
  std::vector<std::pair<std::string, at::Tensor>> metrics;
};

}  // namespace tessel::policy
