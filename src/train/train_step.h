// One optimizer step (ARCHITECTURE "One training step"): forward/backward of
// this rank's micro batches with gradient accumulation, loss normalised by
// the GLOBAL count of valid tokens, clipping by the global norm, AdamW.
//
// Normalisation: before any backward, the valid-token count of the whole
// global batch is all-reduced over the dp group, and every micro batch's
// backward uses loss_sum / global_count. FSDP sums gradients over the dp
// ranks (divide factor 1, set in model_setup), so the gradient is exactly
// that of the mean loss over the global batch, however it was split into
// ranks and micro batches (SPEC 6). Each micro batch's backward
// reduce-scatters into the sharded gradients, HSDP all-reduces after the last
// only; with GradAccumulation::UnshardedUntilLast nothing is reduced before
// the last micro batch (ShardedModel::accumulation).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "dist/device_mesh.h"
#include "optim/adamw.h"
#include "train/model_setup.h"

namespace tessel::train {

struct MicroBatch {
  at::Tensor input_ids;  // [B, T] int64
  at::Tensor labels;     // [B, T] int64, next-token targets, loss::kIgnoreIndex where none
  int64_t num_tokens = 0;  // real (non-padding) tokens, for throughput
  // Packed rows (policy.sequence_packing): per-document positions and
  // document ids (data::Batch), passed to forward_logits so attention stays
  // within each document. Undefined (unpacked): positions 0..T-1, plain causal.
  at::Tensor position_ids;
  at::Tensor document_ids;
  // [B, T], 1 = real token, 0 = padding (data::Batch::attention_mask): which
  // tokens the load-balancing loss of a mixture-of-experts model counts.
  // Undefined = every token.
  at::Tensor attention_mask;
};

struct StepResult {
  // Global mean cross-entropy over valid tokens, plus router_aux_loss_coef *
  // aux_loss for a mixture-of-experts model whose config asks for it
  // (output_router_logits; [Note: the aux loss in tessel's training step] in
  // loss/load_balancing_loss.h).
  double loss = 0.0;
  double aux_loss = 0.0;      // load-balancing loss, mean over the global batch's micro batches (0: none)
  double grad_norm = 0.0;     // before clipping
  int64_t valid_tokens = 0;   // global
  int64_t tokens = 0;         // global
};

// Runs the step and updates the parameters with `lr`. Collective over the
// mesh: every rank passes the same number of micro batches.
StepResult train_step(ShardedModel& model, optim::AdamW& optimizer, const dist::DeviceMesh& mesh,
                      const std::vector<MicroBatch>& micro_batches, double lr,
                      double max_grad_norm);

struct EvalResult {
  double loss = 0.0;  // global mean over valid tokens (NaN when none)
  int64_t valid_tokens = 0;
};

// Loss without gradients over this rank's batches, reduced over the dp group.
EvalResult evaluate(ShardedModel& model, const dist::DeviceMesh& mesh,
                    const std::vector<MicroBatch>& micro_batches);

}  // namespace tessel::train
