// Context parallelism applied to a model (SPEC 2): every self-attention of the
// model attends through the ring over the cp group (ring_attention.h) instead
// of over the rank's rows alone. Nothing else of the model changes: every
// other layer works token by token, and the rotary angles come from the
// position ids the caller passes, which for a cp rank are the global
// positions of its two chunks (train/context_batches.h cuts the rows).
// Parameters are untouched; FSDP shards them over dp_shard_cp.
#pragma once

#include <memory>

#include "dist/communicator.h"
#include "parallel/ring_attention.h"

namespace torch::nn {
class Module;
}

namespace tessel::parallel {

// Installs the ring kernel in every nn::Attention under `root`; returns how
// many. tessel::Error when the model has no attention module. `stats`
// (optional) collects the ring's compute, wait and byte figures.
int apply_context_parallel(torch::nn::Module& root, const dist::CommunicatorPtr& cp,
                           std::shared_ptr<RingAttentionStats> stats = nullptr);

}  // namespace tessel::parallel
