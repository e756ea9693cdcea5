// One optimizer step (ARCHITECTURE "One training step"): forward/backward of
// this rank's micro batches with gradient accumulation, the loss normalised
// by GLOBAL counts, clipping by the global norm, AdamW. What the loss is
// (SFT's cross-entropy, a policy loss) is the step's objective
// (train/step_objective.h); the step is the same for all.
//
// Normalisation: before any backward, the objective counts its divisors
// (valid tokens, sequences) over the whole global batch, all-reduced over the
// dp group, and every micro batch's backward uses its part of the loss
// divided by them. FSDP sums gradients over the dp ranks (divide factor 1,
// set in model_setup), so the gradient is exactly that of the loss over the
// global batch, however it was split into ranks and micro batches (SPEC 6).
// Each micro batch's backward
// reduce-scatters into the sharded gradients, HSDP all-reduces after the last
// only; with GradAccumulation::UnshardedUntilLast nothing is reduced before
// the last micro batch (ShardedModel::accumulation).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
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
  // What a policy loss needs beside the tokens (SPEC 11), by name: values
  // per token aligned with `labels` ([B, T], position t belongs to token
  // t + 1, the target there), which context parallelism cuts like the labels;
  // and values per row ([B]), never cut.
  std::map<std::string, at::Tensor> token_values;
  std::map<std::string, at::Tensor> row_values;
};

class StepObjective;

struct StepResult {
  // The objective's loss (SFT: the global mean cross-entropy over valid
  // tokens), plus router_aux_loss_coef * aux_loss for a mixture-of-experts
  // model whose config asks for it (output_router_logits;
  // [Note: the aux loss in tessel's training step] in loss/load_balancing_loss.h).
  double loss = 0.0;
  double aux_loss = 0.0;      // load-balancing loss, mean over the global batch's micro batches (0: none)
  double grad_norm = 0.0;     // before clipping
  int64_t valid_tokens = 0;   // global
  int64_t tokens = 0;         // global
  // Everything the objective reports ("loss" first, without the aux term).
  std::vector<std::pair<std::string, double>> metrics;
};

// Runs the step of `objective` and updates the parameters with `lr`.
// Collective over the mesh: every rank passes the same number of micro
// batches.
StepResult train_step(ShardedModel& model, optim::AdamW& optimizer, const dist::DeviceMesh& mesh,
                      const std::vector<MicroBatch>& micro_batches, StepObjective& objective, double lr,
                      double max_grad_norm);
// SFT's step: the next-token cross-entropy (train/next_token_objective.h).
StepResult train_step(ShardedModel& model, optim::AdamW& optimizer, const dist::DeviceMesh& mesh,
                      const std::vector<MicroBatch>& micro_batches, double lr,
                      double max_grad_norm);

struct EvalResult {
  double loss = 0.0;  // the objective's loss over the batches (NaN when no token counts)
  int64_t valid_tokens = 0;
  std::vector<std::pair<std::string, double>> metrics;  // the objective's, "loss" first
};

// The objective without gradients over this rank's batches, as one global
// batch (normalised over all of them), reduced over the dp group.
EvalResult evaluate(ShardedModel& model, const dist::DeviceMesh& mesh,
                    const std::vector<MicroBatch>& micro_batches, StepObjective& objective);
// SFT's validation loss: the mean next-token cross-entropy.
EvalResult evaluate(ShardedModel& model, const dist::DeviceMesh& mesh,
                    const std::vector<MicroBatch>& micro_batches);

}  // namespace tessel::train
