// Next-token cross-entropy for causal language models.
//
// Losses are returned as a SUM over valid tokens together with the count of
// valid tokens, never as a local mean: the trainer divides by the GLOBAL count
// of valid tokens (all-reduced over the dp group), so the result does not
// depend on how the global batch was split into micro batches and ranks
// (SPEC 6).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace tessel::loss {

constexpr int64_t kIgnoreIndex = -100;

struct LossSum {
  at::Tensor sum;       // scalar, differentiable: sum of per-token losses over valid tokens
  int64_t num_valid = 0;  // tokens whose label != ignore_index
};

// logits: [..., V] (any float dtype; computed in fp32), labels: [...] int64
// aligned with logits (labels[t] is the target of position t: callers shift).
// Labels outside [0, V) other than ignore_index throw tessel::Error.
LossSum cross_entropy_sum(const at::Tensor& logits, const at::Tensor& labels,
                          int64_t ignore_index = kIgnoreIndex);

// Counts the labels that are not ignore_index and checks each lies in
// [0, vocab): a label outside throws tessel::Error naming it. `flat_labels` is
// int64 of any shape.
int64_t count_valid_labels(const at::Tensor& flat_labels, int64_t vocab, int64_t ignore_index);

// Shifts a [B, T] token batch into next-token labels: labels[:, t] =
// tokens[:, t+1], the last position ignore_index. `loss_mask` (optional, [B, T],
// nonzero = the token at that position is a training target) masks targets.
at::Tensor next_token_labels(const at::Tensor& tokens, const at::Tensor& loss_mask = {},
                             int64_t ignore_index = kIgnoreIndex);

}  // namespace tessel::loss
