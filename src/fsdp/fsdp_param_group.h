// FSDPParamGroup: the parameters of one fully_shard call, moved together by
// one all-gather (segment-wise: each parameter's shards straight into its
// unsharded rows) and one flat reduce-scatter per pass (PyTorch FSDP2's
// FSDPParamGroup). It owns the buffers (layouts in fsdp_collectives.h), the
// ShardedState machine
//     Sharded --unshard--> Unsharded --reshard(k)--> ShardedPostForward
//        ^                    |                           |
//        +-----reshard--------+<---------unshard----------+
// and the TrainingState the hooks move it through (every transition checked:
// [Note: FSDP state machines] in state_machine.h), and the gradient
// reduction: reduce-scatter (SUM) over the shard group, all-reduce (SUM) over
// the replicate group (HSDP; or a reduce-scatter over it into this replica's
// part, FSDPOptions::shard_optimizer_over_replicas), explicit division by the
// dp size, accumulation into the sharded params' fp32 .grad. Hooks and ordering live in FSDPState
// (fsdp_state.h).
//
// Memory (SPEC 4's contract): the unsharded buffer has memory only while
// unsharded (a node-shared group's, opt-in, always: once per node); the packed reduce-scatter input is allocated after the
// unsharded params are freed and freed itself as soon as its reduce-scatter
// completes; the reduced buffer becomes the sharded .grad (views, no copy).
// A one-rank group computes on its shards (fp32: no gather, no copy) and,
// without replicas, hands autograd's gradients to the sharded .grad as they
// are. Everything held beyond the sharded state is counted in memory().
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "fsdp/buffer_pool.h"
#include "fsdp/fsdp_api.h"
#include "fsdp/fsdp_common.h"
#include "fsdp/fsdp_param.h"

namespace tessel::fsdp {

class FSDPParamGroup {
 public:
  // `params` carry their registrations; shard offsets are assigned here. The
  // originals are copied into the shards (originals on the meta device leave
  // them zero, to be filled later); the modules are not touched (see
  // use_sharded_params). Collective when reshard_after_forward is an int k.
  FSDPParamGroup(std::string name, std::vector<std::unique_ptr<FSDPParam>> params,
                 const std::vector<at::Tensor>& originals, FSDPMesh mesh,
                 const FSDPOptions& options);

  const std::string& name() const { return name_; }
  const std::vector<FSDPParam*>& params() const { return param_ptrs_; }
  const FSDPMesh& mesh() const { return mesh_; }
  ShardedState sharded_state() const { return sharded_state_; }
  TrainingState training_state() const { return training_state_; }
  // Throws tessel::Error, naming this group and both states, for a
  // transition state_machine.h does not allow.
  void set_training_state(TrainingState next);
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

  // Node-shared parameters (FSDPOptions::node_shared_params): the unsharded
  // buffer is node-shared memory. In fp32 (shards_in_node_copy) this rank's
  // sharded params are its rows of it: the optimizer updates the node's copy
  // in place. Otherwise publish_own_rows() writes this rank's shards into it
  // (cast to param_dtype), and the caller brackets it with barriers of the
  // shard group (FSDPState's root pre-forward). unshard() and reshard() only
  // mark the state: nothing is gathered or freed.
  bool node_shared() const { return node_shared_; }
  bool shards_in_node_copy() const { return shards_in_node_copy_; }
  void publish_own_rows();

  // --- unshard / reshard -------------------------------------------------
  // Issues the all-gather (async) unless unsharded or already in flight.
  void unshard();
  bool unshard_in_flight() const { return in_flight_.has_value(); }
  // Waits for the in-flight all-gather: afterwards Unsharded.
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
  // Waits for the reduce-scatter and frees its packed input; issues the HSDP
  // all-reduce (async) when requires_all_reduce, else keeps the partial sum
  // for a later microbatch. FSDPState calls it for earlier groups at each
  // post-backward, so reductions finish while backward still runs. Once that
  // reduce-scatter is done, later calls free its output as soon as the
  // replicate reduce-scatter that reads it has finished (split over replicas).
  void finish_reduce_scatter();
  // Waits for the all-reduce, divides by the dp size and accumulates into the
  // sharded params' .grad (fp32).
  void finish_all_reduce();

  bool requires_gradient_sync = true;
  bool requires_all_reduce = true;

  // --- the optimizer's part (FSDPOptions::shard_optimizer_over_replicas) ---
  // The local buffer [L] is the head of a [R*P] one (P = ceil(L/R), the tail
  // zero); replica r owns elements [r*P, (r+1)*P). Backward's replicate
  // reduction is then a reduce-scatter into the part's .grad (fp32, divided
  // like the sharded grads), and the sharded params get no .grad.
  bool splits_over_replicas() const { return split_over_replicas_; }
  // The fp32 leaf [P] over this replica's part of the shards: what the
  // optimizer updates. Undefined unless splits_over_replicas().
  const at::Tensor& replica_part() const { return replica_part_; }
  // Issues (async) the all-gather of every replica's updated part over the
  // replicate group, in place into the local buffer; a no-op unless
  // splits_over_replicas() or while one is in flight. The shards must not be
  // read until wait_for_replica_parts() (unshard() waits first).
  void gather_replica_parts();
  void wait_for_replica_parts();
  // For checkpoints, which hold the optimizer state per parameter shard:
  // every replica's part of a part-shaped tensor gathered into a [R*P]
  // buffer laid out like the shards (blocking; every replica of the group
  // calls it), each parameter's shard viewed in such a buffer (in params()
  // order), and this replica's part of one (a copy).
  at::Tensor gather_parts_of(const at::Tensor& part) const;
  std::vector<at::Tensor> shard_views(const at::Tensor& whole) const;
  at::Tensor part_of(const at::Tensor& whole) const;
  // Whether no all-gather of the parts is in flight any more; tests, never
  // waits (FSDPState's forward prefetch skips a group whose parts are still
  // crossing rather than hold up the current group's compute on them).
  bool replica_parts_arrived() const;

  // --- accounting ----------------------------------------------------------
  int64_t sharded_param_bytes() const { return local_numel_ * static_cast<int64_t>(sizeof(float)); }
  int64_t sharded_grad_bytes() const;
  // Bytes the unsharded parameters of this group take while unsharded
  // (padded, param_dtype); 0 for a one-rank fp32 group, which computes on
  // its shards.
  int64_t unsharded_param_bytes() const { return computes_on_shards_ ? 0 : tensor_bytes(unsharded_flat_); }
  bool computes_on_shards() const { return computes_on_shards_; }
  const std::shared_ptr<MemoryTracker>& memory() const { return memory_; }
  void set_memory_tracker(std::shared_ptr<MemoryTracker> tracker);
  // Where the buffers every pass allocates (unsharded storage, packed
  // gradients) come from; null: the device's allocator. FSDPState gives the
  // decoder layers' groups their root's pool. Only a CPU group takes it: a
  // device's caching allocator reuses blocks already, in stream order.
  void set_buffer_pool(std::shared_ptr<BufferPool> pool) {
    if (mesh_.device().is_cpu()) pool_ = std::move(pool);
  }

 private:
  void release_replica_reduce_input();
  // An all-gather into unsharded_flat_ and the tensor it reads (kept alive
  // until it is done).
  struct InFlight {
    dist::WorkPtr work;
    at::Tensor input;
    bool from_post_forward_slice = false;
  };
  struct PendingReduce {
    dist::WorkPtr reduce_scatter;
    at::Tensor packed;  // [W*L] reduce dtype, rank-major
    at::Tensor output;  // [L] reduce dtype
    dist::WorkPtr all_reduce;  // or, split over replicas, the replicate reduce-scatter into `part`
    at::Tensor part;           // [P] reduce dtype (split over replicas)
    bool apply = false;  // whether finish_all_reduce adds it to the grads
  };

  // As set_training_state, for the ShardedState.
  void set_sharded_state(ShardedState next);
  // A flat [numel] buffer of `dtype` from the pool (or the CPU allocator).
  at::Tensor new_buffer(int64_t numel, at::ScalarType dtype) const;
  // Installs each gradient as its sharded param's .grad (fp32), or adds it
  // into the .grad an earlier micro batch left. grads[i] has param i's
  // sharded shape (undefined: nothing to add).
  void apply_to_sharded_grads(const std::vector<at::Tensor>& grads);
  void track_alloc(Buffer kind, int64_t bytes) { memory_->allocated(kind, bytes); }
  void track_free(Buffer kind, int64_t bytes) { memory_->freed(kind, bytes); }
  // Bytes of a low-precision copy of the shards made for the all-gather (0
  // when the gather reads the fp32 shards themselves).
  int64_t cast_bytes(const at::Tensor& input) const { return input.is_same(local_flat_) ? 0 : tensor_bytes(input); }

  std::string name_;
  std::vector<std::unique_ptr<FSDPParam>> params_;
  std::vector<FSDPParam*> param_ptrs_;
  FSDPMesh mesh_;
  int world_;
  int64_t local_numel_ = 0;  // L
  std::vector<int64_t> shard_numels_;  // each parameter's padded shard, in offset order (they tile L)
  at::ScalarType param_dtype_;
  at::ScalarType reduce_dtype_;
  PostForward post_forward_mode_ = PostForward::Reshard;
  dist::CommunicatorPtr post_forward_comm_;  // the k-rank group for KeepSlice

  at::Tensor local_flat_;             // [L] fp32, the sharded params alias it (undefined: shards_in_node_copy_)
  at::Tensor unsharded_flat_;         // [W*L] param_dtype, the unsharded params alias it
  bool computes_on_shards_ = false;   // unsharded_flat_ is local_flat_ (one rank, fp32)
  bool node_shared_ = false;          // unsharded_flat_ is node-shared memory
  bool shards_in_node_copy_ = false;  // node-shared in fp32: the sharded params alias this rank's rows of it
  at::Tensor post_forward_slice_;     // [W*L/k] when ShardedPostForward
  at::Tensor partial_reduce_output_;  // HSDP: reduce-scattered, not yet all-reduced

  bool split_over_replicas_ = false;  // FSDPOptions::shard_optimizer_over_replicas under HSDP
  int64_t part_numel_ = 0;            // P
  at::Tensor replica_flat_;           // [R*P] fp32: local_flat_ is its head
  at::Tensor replica_part_;           // [P] fp32 leaf over this replica's rows of replica_flat_
  dist::WorkPtr replica_gather_;      // the in-flight all-gather of the parts

  ShardedState sharded_state_ = ShardedState::Sharded;
  TrainingState training_state_ = TrainingState::Idle;
  std::optional<InFlight> in_flight_;
  std::optional<PendingReduce> pending_;
  std::shared_ptr<MemoryTracker> memory_ = std::make_shared<MemoryTracker>();
  std::shared_ptr<BufferPool> pool_;
};

}  // namespace tessel::fsdp
