// The collectives tensor parallelism runs on the tp group per micro batch,
// on every tp rank alike, for `tessel plan --predict`: the activations the
// optimized decoder plan (parallel/optimized_plans/decoder_plan.h) moves in
// forward and backward, the vocab-parallel loss's statistics, and the
// gradients of parameters that stay whole on every tp rank but see only part
// of the work (sequence-parallel norms, per-head q/k norms), which are
// all-reduced in backward. Unlike FSDP's traffic nothing here can hide
// behind compute: each result is the next operation's input.
//
// Per micro batch of `rows` rows of `tokens_per_row` tokens, activations of
// hidden size H in the compute dtype, with L decoder layers of which L_dense
// have a split MLP (a mixture-of-experts block stays whole on every tp rank):
//   without sequence parallelism, all-reduces of [rows, tokens, H]: forward
//     the embedding's output, each attention's and each split MLP's output;
//     backward the gradient of each attention's and split MLP's input (once
//     per block: PrepareModuleInput) and of the head's input;
//   with it, per layer: forward all-gathers of the attention's and the MLP's
//     sequence-sharded inputs, reduce-scatters of their outputs, and two
//     all-gathers of the shard sizes (8 bytes: the blocks' inputs are norm
//     outputs, which carry no global length); backward the adjoints (each
//     all-gather's a reduce-scatter and back); the embedding reduce-scatters
//     its output and the head all-gathers its input (and its shard sizes),
//     with adjoints in backward;
//   the loss: all-reduces of the rows' maxima (fp32, one per token) and of
//     their exp-sums and target logits (two per token);
//   in backward, an all-reduce of each listed parameter's gradient;
//   with activation checkpointing, each layer's forward collectives again in
//     backward (the recomputation).
// Counted per rank as the communicators count them (dist/communicator.h).
// Measured against a run's counters: tests/train/mpi/tp_traffic_prediction_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "models/model_config.h"

namespace tessel::cli {

// Which plan shapes the tp traffic: the optimized decoder plan with or
// without sequence parallelism; other plans (HF, custom) are not modelled.
enum class TpPlanForm { Optimized, OptimizedSequenceParallel, NotModelled };

struct TpAllReduce {
  int64_t numel = 0;
  int64_t element_size = 4;
  bool forward = true;
};
struct TpToEachPeer {  // an all-gather's shard, or a reduce-scatter's chunk, sent to each peer
  int64_t bytes = 0;
  bool forward = true;
};

struct TpCollectives {
  std::vector<TpAllReduce> all_reduces;  // per micro batch
  std::vector<TpToEachPeer> to_each_peer;  // per micro batch
  int64_t forward_count() const;
  int64_t backward_count() const;
};

struct TpStepShape {
  int tp = 1;
  int64_t rows = 1;            // per micro batch
  int64_t tokens_per_row = 1;  // on this rank (after context parallelism's split)
  int activation_element_bytes = 4;  // the compute dtype
  bool activation_checkpointing = false;
};

// `whole_param_grads`: numels of the parameters whose gradients the plan
// all-reduces over tp (cli/plan_layout.cpp reads them from the styles the
// plan applied). Nothing is returned for tp 1 or a plan form not modelled.
TpCollectives tp_collectives(const models::ModelConfig& model, TpPlanForm form, const TpStepShape& step,
                             const std::vector<int64_t>& whole_param_grads);

}  // namespace tessel::cli
