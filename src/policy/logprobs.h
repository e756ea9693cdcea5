// get_logprobs (SPEC 11): what the policy assigned to each token of a batch of
// sequences, on any layout, as NeMo RL's policy worker reports it.
//
// For right-padded input_ids [B, S] and input_lengths [B], logprobs [B, S]
// float32: position 0 is 0 (nothing precedes it), position i < length is
// log softmax(logits_{i-1} / temperature)[token_i], positions >= length are 0.
//
// Layouts: the rows go through the sharded model's forward as one micro
// batch. Under tensor parallelism the logits stay vocab-sharded and
// policy/token_logprobs.h reduces the three row statistics over tp; under
// context parallelism each rank computes the log-probs of its load-balanced
// chunks (train/context_batches.h) and one all-gather over cp makes the rows
// whole again. Log-probs are computed a block of rows at a time: no float32
// copy of the [B, S, V] logits is made (the model's forward still returns its
// logits in the model's dtype).
#pragma once

#include <ATen/core/Tensor.h>

#include "dist/device_mesh.h"
#include "policy/token_logprobs.h"
#include "train/model_setup.h"

namespace tessel::policy {

// The targets of next-token prediction aligned with the logits: [B, S] where
// position t holds input_ids[b, t + 1] while t + 1 < input_lengths[b], else
// -1 (no target). Lengths outside [1, S] throw tessel::UsageError.
at::Tensor next_token_targets(const at::Tensor& input_ids, const at::Tensor& input_lengths);

// Which vocabulary columns `logits` (the model's output on this rank) hold:
// all of them, or this tp rank's slice of a column-parallel lm_head.
VocabSlice vocab_slice_of(const train::ShardedModel& model, const at::Tensor& logits);

// The log-probs of `labels` (aligned with the logits, negative = none: 0
// there) from the model's `logits` for one micro batch piece, [B, T] float32,
// differentiable: what the policy losses train on. Collective over tp.
at::Tensor aligned_logprobs(const train::ShardedModel& model, const at::Tensor& logits, const at::Tensor& labels,
                            double temperature);

// Collective over the mesh: the tp and cp ranks of one dp rank pass the same
// rows; different dp ranks may pass different rows (and batch sizes). No
// gradients are recorded. temperature > 0. `fused_head`: from the fused head
// (CausalLM::forward_token_losses; no tensor parallelism), the arithmetic a
// fused-head policy trains with, so that a policy equal to its reference (or
// GRPO's policy at its first update, to the previous log-probs) gets exactly
// its log-probs; no logits.
at::Tensor get_logprobs(train::ShardedModel& model, const dist::DeviceMesh& mesh, const at::Tensor& input_ids,
                        const at::Tensor& input_lengths, double temperature = 1.0, bool fused_head = false);

// Turns log-probs aligned with the logits ([B, S], position t = the log-prob
// of token t + 1) into get_logprobs' layout (position i = token i; position 0
// is 0).
at::Tensor logprobs_by_token(const at::Tensor& aligned);
// The inverse: get_logprobs' layout aligned with the labels (the last
// position, which predicts nothing, is 0).
at::Tensor logprobs_aligned_with_labels(const at::Tensor& by_token);

}  // namespace tessel::policy
