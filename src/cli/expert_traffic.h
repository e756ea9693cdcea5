// What expert parallelism costs and saves per rank, in closed form (issue 14):
// the expert bytes each rank holds, and the bytes its token exchange sends.
//
// The exchange of one sparse-layer forward on one rank (parallel/expert_dispatch.h):
//   counts:  an all-to-all of the E per-expert counts (int64), E/ep to each
//            of the ep-1 peers;
//   rows:    its assignments (token, slot) for other ranks' experts go out
//            (rows_sent x hidden), the rows it got come back as results
//            (rows_received x hidden), in the activation dtype.
// Its backward runs both row exchanges in reverse (the gradients of the
// results to the experts' ranks, the gradients of the rows back), the same
// bytes again; activation checkpointing runs the forward exchange a second
// time. Only bytes to peers count (a rank's rows for its own experts stay).
// With routing unknown (tessel plan), every assignment lands on any expert
// alike: (ep-1)/ep of a rank's tokens x top-k leave it in each direction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model_config.h"

namespace tessel::cli {

struct ExpertExchangeShape {
  int64_t hidden = 0;
  int64_t num_experts = 0;
  int ep = 1;
  int activation_element_bytes = 4;  // the compute dtype (bf16: 2)
  bool activation_checkpointing = false;
};

// One rank's bytes to its ep peers for `forward_calls` sparse-layer forwards
// (and their backwards) that sent `rows_sent` and received `rows_received`
// assignments from other ranks in all (what parallel::ExpertDispatchStats
// counts in a run without activation checkpointing; with it, the stats count
// the re-run forwards too, and `shape` says so here).
int64_t expert_exchange_bytes(const ExpertExchangeShape& shape, int64_t forward_calls, int64_t rows_sent,
                              int64_t rows_received);

// Expert `e` of "...experts.{e}...." parameter names, or -1 for any other
// parameter.
int64_t expert_of(const std::string& param_name);

// The sparse layers of the model (models::is_moe_layer).
int64_t sparse_layer_count(const models::ModelConfig& config);

// One step on one rank under uniform routing: `tokens_per_micro_batch` tokens
// (rows x sequence, padding included: padded tokens are routed too) in each
// of `micro_batches` micro batches.
struct ExpertExchangeEstimate {
  int64_t forward_calls = 0;     // sparse-layer forwards per rank per step
  int64_t rows_off_rank = 0;     // assignments sent to other ranks per rank per step (= received)
  int64_t bytes_per_rank = 0;    // to peers, all exchanges of the step
};
ExpertExchangeEstimate uniform_expert_exchange(const models::ModelConfig& config, const ExpertExchangeShape& shape,
                                               int64_t tokens_per_micro_batch, int64_t micro_batches);

}  // namespace tessel::cli
