// fully_shard: FSDP2's entry point (SPEC section 4). Apply it bottom-up: to
// each decoder layer, then to the root model, whose group takes what is left
// (embedding, final norm, lm_head; a tied embedding and lm_head stay together
// there). Each call turns the module's parameters into one FSDPParamGroup: one
// flat all-gather before its forward (and before its backward when resharded)
// and one flat reduce-scatter of its gradients per pass. After the call the
// module's registered parameters are the fp32 local shards: build the
// optimizer from root->parameters() afterwards.
//
// Every rank of the mesh must make the same fully_shard calls in the same
// order and run the same modules each step (the collectives pair up by order).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "fsdp/fsdp_api.h"
#include "nn/module.h"

namespace tessel::fsdp {

class FSDPState;
class FSDPParamGroup;

// Bytes one rank holds, for the accounting of SPEC 4's memory contract.
// Optimizer state is the caller's (e.g. optim::AdamW::state_bytes()).
struct FSDPMemoryStats {
  int64_t sharded_param_bytes = 0;         // fp32 padded local shards
  int64_t sharded_grad_bytes = 0;          // fp32 .grad of the shards
  int64_t unsharded_param_bytes = 0;       // unsharded params (+ low-precision gather inputs) alive now
  int64_t peak_unsharded_param_bytes = 0;  // their peak since the last reset
  // Packed reduce-scatter inputs, reduce outputs not yet applied to .grad,
  // full gradients kept across microbatches (no sync): alive now.
  int64_t gradient_buffer_bytes = 0;
  // Peak of everything FSDP holds beyond the sharded state (unsharded params,
  // gather inputs and gradient buffers together) since the last reset.
  int64_t peak_transient_bytes = 0;
};

// Handle to a module fully_shard was applied to (PyTorch's FSDPModule
// methods). Cheap to copy; the state itself lives as long as the module.
class FSDPModule {
 public:
  explicit FSDPModule(std::shared_ptr<FSDPState> state);

  nn::Module& module() const;
  // Null when the module had no parameters left for its own group.
  FSDPParamGroup* param_group() const;

  // Gradient accumulation without communication: with false, backward keeps
  // the full gradients (summed over microbatches); the next backward with
  // true reduces the sum. recurse: also every sharded module under this one.
  void set_requires_gradient_sync(bool enabled, bool recurse = true);
  // HSDP accumulation: with false, backward reduce-scatters but skips the
  // replicate all-reduce; the next backward with true all-reduces the sum.
  void set_requires_all_reduce(bool enabled, bool recurse = true);

  // Explicit unshard (all-gather, waits) / reshard of this module's group.
  void unshard();
  void reshard();

  // All-gathers issued ahead of use (forward: the next group's, backward: the
  // previous group's) since the root's first forward; 0 before it.
  int64_t prefetched_all_gathers() const;

  // The groups of this module and every sharded module under it whose
  // optimizer part is split over replicas (FSDPOptions::
  // shard_optimizer_over_replicas), root first, then module pre-order; empty
  // when none is.
  std::vector<FSDPParamGroup*> replica_split_groups() const;
  // Waits for their part all-gathers: afterwards every shard reads as updated.
  void wait_for_replica_parts() const;
  // Over this module and every sharded module under it.
  FSDPMemoryStats memory_stats() const;
  void reset_peak_memory();

 private:
  std::shared_ptr<FSDPState> state_;
};

// Shards module's parameters (those not already in a group of a sharded
// submodule) over mesh.shard() and installs the hooks. Throws tessel::Error
// when applied twice, when a parameter is tied to one of another group, or
// when a module owning parameters is not a tessel::nn::Module.
FSDPModule fully_shard(nn::Module& module, const FSDPMesh& mesh, FSDPOptions options = {});

// The handle for a module fully_shard was applied to, if any.
std::optional<FSDPModule> fsdp_module(nn::Module& module);

}  // namespace tessel::fsdp
