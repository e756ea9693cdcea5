// Examples -> [B, T] tensors for one micro batch, padded or packed.
//
// Padded (collate): one example per row, padded with pad_id on the right.
// Packed (pack): several examples per row (first-fit decreasing by length),
// each a "document" whose position_ids restart at 0 and whose first token is
// never a target, so no loss crosses a document boundary.
//
// [Note: packing and attention] A packed row is only equivalent to its
// documents trained separately when the model (a) uses the per-token
// position_ids and (b) attends block-diagonally: token t sees token s only if
// document_ids[t] == document_ids[s] and s <= t. tessel's models do both when
// given position_ids and document_ids (CausalLM::forward_logits; host ids run
// attention once per document, nn/document_runs.h, other ids become a mask in
// the kernel, combined with any sliding window), which the
// trainer passes for packed micro batches (policy.sequence_packing). Without
// document_ids a model applies a plain causal mask over the whole row, and a
// document would also attend to the documents before it in its row.
//
// T is the longest row rounded up to a multiple of divisible_by
// (policy.make_sequence_length_divisible_by, e.g. the tp size for sequence
// parallelism), or pad_to_length when set.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "data/dataset.h"

namespace tessel::data {

struct Batch {
  at::Tensor input_ids;       // [B, T] int64
  at::Tensor loss_mask;       // [B, T] int64, 1 = token is a target (loss::next_token_labels)
  at::Tensor attention_mask;  // [B, T] int64, 1 = real token, 0 = padding
  at::Tensor position_ids;    // [B, T] int64, 0.. per document
  at::Tensor document_ids;    // [B, T] int64, document index within its row, -1 = padding
  // Targets next-token prediction reaches: sum of loss_mask[:, 1:] (the
  // local count the trainer all-reduces for loss normalisation).
  int64_t num_targets = 0;
  int64_t num_tokens = 0;  // real (non-padding) tokens
};

struct CollateOptions {
  int64_t pad_id = 0;
  int64_t divisible_by = 1;
  int64_t pad_to_length = 0;  // 0 = the longest row (rounded up)
};

Batch collate(const Dataset& dataset, const std::vector<int64_t>& indices,
              const CollateOptions& options);

// Packs the examples into rows of at most row_capacity tokens. Throws
// tessel::UsageError when one example is longer than row_capacity.
Batch pack(const Dataset& dataset, const std::vector<int64_t>& indices, int64_t row_capacity,
           const CollateOptions& options);

// Whether `document_ids` (as Batch's, on the CPU) say nothing a causal mask
// does not: every row one document (0), then padding (-1), as collate writes
// unpacked rows. Without them, padding would see its row's document instead
// of only padding: that changes only the padding's own outputs, which are
// never targets (nor counted by the experts' load-balancing loss). A device's
// fused attention then runs causal, without a [B, T, T] mask
// (train/train_step.cpp).
bool documents_are_whole_rows(const at::Tensor& document_ids);

}  // namespace tessel::data
