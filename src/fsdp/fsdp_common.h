// Small pieces shared by the FSDP files: the state enums (PyTorch FSDP2's
// names), freeing and re-allocating a tensor's storage in place (how
// unsharded parameters are freed after forward and restored for backward, see
// [Note: FSDP and autograd] in fsdp_state.cpp), and the tracker of unsharded
// parameter bytes behind the memory accounting.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace tessel::fsdp {

// Where a parameter group is in the training step.
enum class TrainingState { Idle, Forward, PreBackward, PostBackward };
// What a parameter group holds in memory: only its shards, its shards plus a
// 1/k slice of the unsharded data (reshard_after_forward = k), or the
// unsharded parameters.
enum class ShardedState { Sharded, ShardedPostForward, Unsharded };

const char* to_string(TrainingState state);
const char* to_string(ShardedState state);

// Frees the memory behind `t`'s storage while every tensor viewing it (the
// unsharded parameters, tensors autograd saved) keeps its shape and identity.
void free_storage(const at::Tensor& t);
// Re-allocates the storage freed by free_storage (contents undefined) with
// room for t's elements; no-op when already allocated.
void alloc_storage(const at::Tensor& t);
bool storage_is_allocated(const at::Tensor& t);
int64_t tensor_bytes(const at::Tensor& t);

// Unsharded parameter bytes alive now (gather buffers, unsharded parameters,
// post-forward slices) and their peak, over every group of one root.
class MemoryTracker {
 public:
  void allocated(int64_t bytes);
  void freed(int64_t bytes);
  int64_t current() const { return current_; }
  int64_t peak() const { return peak_; }
  void reset_peak() { peak_ = current_; }

 private:
  int64_t current_ = 0;
  int64_t peak_ = 0;
};

}  // namespace tessel::fsdp
