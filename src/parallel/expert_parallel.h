// Expert parallelism over a model (SPEC 2, issue 14): the experts of every
// sparse MoE block split over the ep group — group rank j keeps experts
// [j*E/ep, (j+1)*E/ep) under their global names (experts.{e}), drops the
// rest before any is materialised, and routes its tokens to the experts'
// ranks through parallel::dispatch_to_experts. The router stays replicated,
// so every token's router logits (and the load-balancing loss over them) are
// computed on the token's own rank as without expert parallelism.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "nn/module.h"
#include "nn/sparse_moe.h"
#include "parallel/expert_dispatch.h"

namespace tessel::parallel {

// The sparse MoE blocks of `root`, in module order.
std::vector<std::shared_ptr<nn::SparseMoeBlock>> sparse_moe_blocks(nn::Module& root);

// Splits every block's experts over `ep` (E must divide by ep->size():
// parallel::check_expert_parallel says so to the user first). `stats`, when
// given, accumulates the rows this rank exchanged. Returns the parameters
// this rank dropped (the other ranks' experts) with their shapes: loading and
// checkpointing name every parameter of the model, held here or not.
std::map<std::string, std::vector<int64_t>> apply_expert_parallel(nn::Module& root, const dist::CommunicatorPtr& ep,
                                               std::shared_ptr<ExpertDispatchStats> stats = nullptr);

}  // namespace tessel::parallel
