// Expert parallelism's token exchange around the experts of one MoE layer
// (SPEC 2, issue 14): the E experts split over the ep group, rank j holding
// experts [j*E/ep, (j+1)*E/ep). Each rank routes its own tokens; then
//   1. the per-expert assignment counts are exchanged (an all-to-all of
//      ep x E/ep int64), so every rank knows how many rows it receives;
//   2. each (token, slot) assignment's row travels to its expert's rank
//      (all_to_all_rows, variable counts);
//   3. the receiving rank runs each local expert once over all rows it got
//      for it, from every source (grouped, no per-token loop; an expert with
//      no rows still runs, so its gradient is exact zeros);
//   4. the results travel back by the reverse exchange and are combined with
//      the routing weights into each token's output.
// Backward goes through the same exchanges reversed (all_to_all_rows), so
// the router weights, the tokens and the experts all get their gradients.
// Every rank of the group must call it for every MoE layer, in the same order.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

#include "dist/communicator.h"

namespace tessel::parallel {

// rows [n, H] of local expert `local` (0 .. E/ep-1) -> its output [n, H]
using LocalExpert = std::function<at::Tensor(int64_t local, const at::Tensor& rows)>;

struct ExpertDispatchStats {
  int64_t rows_sent = 0;      // assignments this rank sent to other ranks (both directions counted once)
  int64_t rows_received = 0;  // assignments other ranks sent this rank
  // (layer call, expert) pairs where this rank routed no token to the expert:
  // the zero counts the exchange must carry.
  int64_t experts_without_tokens = 0;
};

// tokens [N, H]; chosen [N, k] global expert ids; weights [N, k] (the routing
// weights in the activation dtype). Returns [N, H]: sum over a token's k
// slots of weight x expert output. `num_experts` must divide by group->size().
at::Tensor dispatch_to_experts(const at::Tensor& tokens, const at::Tensor& chosen, const at::Tensor& weights,
                               int64_t num_experts, const dist::CommunicatorPtr& group,
                               const LocalExpert& run_expert, ExpertDispatchStats* stats = nullptr);

}  // namespace tessel::parallel
