// FSDPParamGroup: the parameters of one fully_shard call, moved together by
// one flat all-gather and one flat reduce-scatter per pass (PyTorch FSDP2's
// FSDPParamGroup). It owns the buffers (layouts in fsdp_collectives.h), the
// ShardedState machine
//     Sharded --unshard--> Unsharded --reshard(k)--> ShardedPostForward
//        ^                    |                           |
//        +-----reshard--------+<---------unshard----------+
// and the gradient reduction: reduce-scatter (SUM) over the shard group,
// all-reduce (SUM) over the replicate group (HSDP), explicit division by the
// dp size, accumulation into the sharded params' fp32 .grad. Hooks and
// ordering live in FSDPState (fsdp_state.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "fsdp/fsdp_api.h"
#include "fsdp/fsdp_common.h"
#include "fsdp/fsdp_param.h"

namespace tessel::fsdp {

class FSDPParamGroup {
 public:
  // `params` carry their registrations; shard offsets are assigned here. The
  // originals are copied into the shards; the modules are not touched (see
  // use_sharded_params). Collective when reshard_after_forward is an int k.
  FSDPParamGroup(std::string name, std::vector<std::unique_ptr<FSDPParam>> params,
                 const std::vector<at::Tensor>& originals, FSDPMesh mesh,
                 const FSDPOptions& options);

  const std::string& name() const { return name_; }
  const std::vector<FSDPParam*>& params() const { return param_ptrs_; }
  const FSDPMesh& mesh() const { return mesh_; }
  ShardedState sharded_state() const { return sharded_state_; }
  TrainingState training_state() const { return training_state_; }
  void set_training_state(TrainingState s) { training_state_ = s; }
  at::ScalarType param_dtype() const { return param_dtype_; }
  at::ScalarType reduce_dtype() const { return reduce_dtype_; }
  // The communicator backward re-gathers from after forward: the k-rank group
  // for reshard_after_forward = k, else the shard group.
  const dist::CommunicatorPtr& post_forward_group() const;

  // What post_forward_reshard does.
  enum class PostForward { Keep, Reshard, KeepSlice };
  PostForward post_forward_mode() const { return post_forward_mode_; }
  // Root groups stay unsharded after forward (FSDPState sets this).
  void set_keep_unsharded_after_forward() { post_forward_mode_ = PostForward::Keep; }

  // --- unshard / reshard -------------------------------------------------
  // Issues the all-gather (async) unless unsharded or already in flight.
  void unshard();
  bool unshard_in_flight() const { return in_flight_.has_value(); }
  // Waits for the in-flight all-gather and copies out: afterwards Unsharded.
  void wait_for_unshard();
  // Frees everything unsharded: afterwards Sharded. Waits for an in-flight gather.
  void reshard();
  // After forward: keep (false / root), free (true) or keep a 1/k slice.
  void post_forward_reshard();

  // Installs the unsharded params (or the sharded ones) as the registered
  // parameters of the modules that own them (nn::Module::replace_parameter).
  void use_unsharded_params();
  void use_sharded_params();

  // --- gradients ---------------------------------------------------------
  // Takes the unsharded params' .grad. With gradient sync: packs them (plus
  // what earlier microbatches accumulated), reshards, issues the
  // reduce-scatter (async). Without: accumulates them for a later microbatch.
  void post_backward();
  bool has_pending_reduce() const { return pending_.has_value(); }
  // Waits for the reduce-scatter; issues the HSDP all-reduce (async) when
  // requires_all_reduce, else keeps the partial sum for a later microbatch.
  void finish_reduce_scatter();
  // Waits for the all-reduce, divides by the dp size and accumulates into the
  // sharded params' .grad (fp32).
  void finish_all_reduce();

  bool requires_gradient_sync = true;
  bool requires_all_reduce = true;

  // --- accounting ----------------------------------------------------------
  int64_t sharded_param_bytes() const { return tensor_bytes(local_flat_); }
  int64_t sharded_grad_bytes() const;
  // Bytes of the unsharded parameters of this group (padded, param_dtype).
  int64_t unsharded_param_bytes() const { return tensor_bytes(unsharded_flat_); }
  const std::shared_ptr<MemoryTracker>& memory() const { return memory_; }
  void set_memory_tracker(std::shared_ptr<MemoryTracker> tracker);

 private:
  struct InFlight {
    dist::WorkPtr work;
    at::Tensor input;
    at::Tensor output;
    bool from_post_forward_slice = false;
  };
  struct PendingReduce {
    dist::WorkPtr reduce_scatter;
    at::Tensor packed;  // [W*L] reduce dtype, rank-major
    at::Tensor output;  // [L] reduce dtype
    dist::WorkPtr all_reduce;
    bool apply = false;  // whether finish_all_reduce adds it to the grads
  };

  void track_alloc(int64_t bytes) { memory_->allocated(bytes); }
  void track_free(int64_t bytes) { memory_->freed(bytes); }

  std::string name_;
  std::vector<std::unique_ptr<FSDPParam>> params_;
  std::vector<FSDPParam*> param_ptrs_;
  FSDPMesh mesh_;
  int world_;
  int64_t local_numel_ = 0;  // L
  at::ScalarType param_dtype_;
  at::ScalarType reduce_dtype_;
  PostForward post_forward_mode_ = PostForward::Reshard;
  dist::CommunicatorPtr post_forward_comm_;  // the k-rank group for KeepSlice

  at::Tensor local_flat_;             // [L] fp32, the sharded params alias it
  at::Tensor unsharded_flat_;         // [W*L] param_dtype, the unsharded params alias it
  at::Tensor post_forward_slice_;     // [W*L/k] when ShardedPostForward
  at::Tensor partial_reduce_output_;  // HSDP: reduce-scattered, not yet all-reduced

  ShardedState sharded_state_ = ShardedState::Sharded;
  TrainingState training_state_ = TrainingState::Idle;
  std::optional<InFlight> in_flight_;
  std::optional<PendingReduce> pending_;
  std::shared_ptr<MemoryTracker> memory_ = std::make_shared<MemoryTracker>();
};

}  // namespace tessel::fsdp
