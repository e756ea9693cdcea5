// The user-facing options of fully_shard (PyTorch FSDP2's _fsdp_api): which
// ranks shard and replicate the parameters (FSDPMesh), when unsharded
// parameters are freed (reshard_after_forward) and in which dtypes FSDP
// gathers, computes and reduces (MixedPrecisionPolicy). SPEC section 4.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <variant>

#include "dist/communicator.h"

namespace tessel::fsdp {

// Sharded master parameters, their gradients and the optimizer state are
// always fp32; these dtypes only change the unsharded copies and the
// reduction. The reference setting is bf16 / fp32 / fp32.
struct MixedPrecisionPolicy {
  // dtype of the all-gather and of the unsharded parameters used in compute
  // (floating inputs of a sharded module are cast to it). nullopt: fp32.
  std::optional<at::ScalarType> param_dtype;
  // dtype of the gradient reduce-scatter / all-reduce. nullopt: param_dtype.
  std::optional<at::ScalarType> reduce_dtype;
  // Floating outputs of a sharded module are cast to it. nullopt: unchanged.
  std::optional<at::ScalarType> output_dtype;
};

// The groups a parameter group is sharded and replicated over, and the device
// its ranks compute on. From a device mesh: shard = group("dp_shard_cp"),
// replicate = group("dp_replicate"), device = mesh.device().
class FSDPMesh {
 public:
  FSDPMesh() = default;
  // `replicate` may be null (pure FSDP). HSDP when replicate->size() > 1.
  // Shards, gradients and unsharded parameters live on `device` (as FSDP2
  // takes the device from its mesh); the model may be built anywhere, the
  // meta device included.
  explicit FSDPMesh(dist::CommunicatorPtr shard, dist::CommunicatorPtr replicate = nullptr,
                    c10::Device device = c10::Device(c10::kCPU));

  const dist::CommunicatorPtr& shard() const { return shard_; }
  c10::Device device() const { return device_; }
  const dist::CommunicatorPtr& replicate() const { return replicate_; }
  bool is_hybrid() const { return replicate_ && replicate_->size() > 1; }
  int shard_size() const { return shard_->size(); }
  int replicate_size() const { return replicate_ ? replicate_->size() : 1; }

  // Gradients are SUM-reduced, then divided by this (SPEC 4: never a backend
  // AVG). Default replicate x shard, which includes cp when the shard group is
  // dp_shard_cp. Set it when the loss is normalised differently.
  int64_t gradient_divide_factor() const;
  void set_gradient_divide_factor(int64_t factor);

  // The k-rank subgroup of the shard group (consecutive shard ranks
  // [k*(r/k), k*(r/k)+k)) that reshard_after_forward = k keeps its slice
  // over. Collective on first use for a given k (every shard rank must ask
  // for the same k in the same order); cached, shared by copies of this mesh.
  dist::CommunicatorPtr post_forward_group(int k) const;

 private:
  dist::CommunicatorPtr shard_;
  dist::CommunicatorPtr replicate_;
  c10::Device device_ = c10::Device(c10::kCPU);
  int64_t divide_factor_ = 0;  // 0: replicate x shard
  struct Cache {
    std::mutex mutex;
    std::map<int, dist::CommunicatorPtr> post_forward;
  };
  std::shared_ptr<Cache> cache_ = std::make_shared<Cache>();
};

struct FSDPOptions {
  // true: free the unsharded parameters after forward, re-gather in backward.
  // false: keep them until the end of backward (no backward all-gather).
  // int k: keep a 1/k slice (the unsharded data sharded again over a k-rank
  //   subgroup of the shard group, k dividing its size) and re-gather it from
  //   that subgroup in backward: less memory than false, a cheaper (e.g.
  //   intra-node) gather than true. k == 1 means false, k == shard size true.
  // The root group (the outermost fully_shard module) is never resharded after
  // forward: its backward starts right away.
  std::variant<bool, int> reshard_after_forward = true;
  MixedPrecisionPolicy mp_policy;
  // Node-shared parameters (CPU, every rank of the shard group on one
  // machine): the group's unsharded parameters live once per node, in memory
  // all its ranks map (dist/node_shared_memory.h), instead of once per rank.
  // In fp32 a rank's shards are its own rows of that copy: the optimizer
  // updates the node's copy in place and no rank keeps shard memory of its
  // own; a barrier of the shard group at the end of backward (nobody reads
  // the parameters any more) and one at the root's pre-forward (every update
  // is in) order the updates against the other ranks' reads. With another
  // param_dtype the shards stay per rank and each rank writes their cast into
  // its rows at the root's pre-forward, between two barriers. Forward and
  // backward compute straight from the node's copy: no all-gathers, no
  // re-gathers, nothing freed after forward (so reshard_after_forward's bool
  // makes no difference, and an int k, a slice kept over a subgroup, is
  // refused). Gradients are reduce-scattered as usual (docs/bench/fsdp_cpu.md).
  bool node_shared_params = false;
  // HSDP only (a replicate group of R > 1 ranks; ignored without one): the
  // optimizer runs on 1/R of each group's shards per replica instead of on
  // all of them in every replica. Backward reduce-scatters the shard-reduced
  // gradient over the replicate group (half an all-reduce's bytes), each
  // replica updates its part (FSDPParamGroup::replica_part(): the AdamW state
  // exists for that part only) and all-gathers the updated parts over the
  // replicate group, awaited only before the group's next all-gather: the
  // cross-replica traffic of step t then overlaps step t+1's forward instead
  // of idling the link through the optimizer (issue 43). The caller drives
  // the part's update and gather (train/train_step.cpp). Refused with
  // node_shared_params.
  bool shard_optimizer_over_replicas = false;
};

}  // namespace tessel::fsdp
