// Small pieces shared by the FSDP files: the state enums (state_machine.h,
// included here), freeing and re-allocating a tensor's storage in place (how
// unsharded parameters are freed after forward and restored for backward, see
// [Note: FSDP and autograd] in fsdp_state.cpp), and the tracker of unsharded
// parameter bytes behind the memory accounting.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>

#include "fsdp/state_machine.h"

namespace tessel::fsdp {

// Frees the memory behind `t`'s storage while every tensor viewing it (the
// unsharded parameters, tensors autograd saved) keeps its shape and identity.
void free_storage(const at::Tensor& t);
// Re-allocates the storage freed by free_storage (contents undefined) with
// room for t's elements, from `allocator` (default: the storage's own);
// no-op when already allocated.
void alloc_storage(const at::Tensor& t, c10::Allocator* allocator = nullptr);
bool storage_is_allocated(const at::Tensor& t);
int64_t tensor_bytes(const at::Tensor& t);

// A flat tensor [numel] of `dtype` over memory someone else allocated (its
// deleter frees it): how the buffer pool and the shard storage hand out
// memory of their own.
at::Tensor flat_tensor_over(c10::DataPtr data, int64_t numel, at::ScalarType dtype);

// A group's flat fp32 shard storage on `device`, zeroed, from that device's
// allocator, with a deleter of FSDP's own: is_shard_storage(t) tells, from
// the tensor alone, that t's memory is a group's shards, i.e. that t is a
// parameter some fully_shard already took (no process-wide table of groups
// is needed).
at::Tensor new_shard_storage(int64_t numel, c10::Device device = c10::Device(c10::kCPU));
bool is_shard_storage(const at::Tensor& t);
// The same mark on memory allocated elsewhere (a node-shared buffer whose
// rows are the shards): `data` is kept and freed by its own deleter.
c10::DataPtr mark_as_shard_storage(c10::DataPtr data);

// What FSDP holds beyond the sharded state, over every group of one root:
// unsharded parameters (and post-forward slices, low-precision copies of
// the shards being gathered), and gradient buffers (packed reduce-scatter
// inputs, reduce outputs not yet applied to the sharded .grad, full
// gradients kept across microbatches without sync). Each kind's current bytes and the peak of their sum.
enum class Buffer { UnshardedParams = 0, Gradients = 1 };

class MemoryTracker {
 public:
  void allocated(Buffer kind, int64_t bytes);
  void freed(Buffer kind, int64_t bytes);
  int64_t current(Buffer kind) const { return current_[static_cast<int>(kind)]; }
  int64_t current() const { return current_[0] + current_[1]; }
  int64_t peak() const { return peak_; }
  // Peak of the unsharded parameters alone.
  int64_t peak_params() const { return peak_params_; }
  void reset_peak() {
    peak_ = current();
    peak_params_ = current_[0];
  }

 private:
  int64_t current_[2] = {0, 0};
  int64_t peak_ = 0;
  int64_t peak_params_ = 0;
};

// A flat tensor of `numel` elements whose storage holds no memory yet (as
// after free_storage): alloc_storage gives it some. Lets FSDP lay out
// unsharded parameters over a buffer without ever allocating it up front.
at::Tensor unallocated_flat(int64_t numel, const at::TensorOptions& options);

}  // namespace tessel::fsdp
