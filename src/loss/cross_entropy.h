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

// Both as tensors on the labels' device: reading a device tensor waits for
// its queue, so whoever needs a number reads it (once per step, not per
// micro batch: train/step_objective.h).
struct LossSum {
  at::Tensor sum;        // scalar, differentiable: sum of per-token losses over valid tokens
  at::Tensor num_valid;  // scalar int64: tokens whose label != ignore_index
};

// logits: [..., V] (any float dtype; computed in fp32), labels: [...] int64
// aligned with logits (labels[t] is the target of position t: callers shift).
// Host labels outside [0, V) other than ignore_index throw tessel::Error;
// device labels are not read (see check_labels_in_vocabulary).
LossSum cross_entropy_sum(const at::Tensor& logits, const at::Tensor& labels,
                          int64_t ignore_index = kIgnoreIndex);

// Throws tessel::Error naming a label (any shape, any integer dtype) that is
// neither ignore_index nor in [0, vocab); `who` begins the message. It reads
// the labels' values: on a device that would wait for everything queued
// before it, so batches are checked on the host before they move
// (train/train_step.cpp, policy/logprobs.cpp) and the losses check only
// labels that are on the host.
void check_labels_in_vocabulary(const at::Tensor& labels, int64_t vocab, int64_t ignore_index, const char* who);

// Shifts a [B, T] token batch into next-token labels: labels[:, t] =
// tokens[:, t+1], the last position ignore_index. `loss_mask` (optional, [B, T],
// nonzero = the token at that position is a training target) masks targets.
at::Tensor next_token_labels(const at::Tensor& tokens, const at::Tensor& loss_mask = {},
                             int64_t ignore_index = kIgnoreIndex);

}  // namespace tessel::loss
