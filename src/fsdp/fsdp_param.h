// FSDPParam: one parameter's three faces (PyTorch FSDP2's FSDPParam).
//   sharded param    fp32 leaf [local_rows, ...]: this rank's dim-0 chunk (torch.chunk
//                    sizes: trailing ranks short or empty); what the optimizer sees
//                    and updates; aliases the group's padded local buffer.
//   padded shard     [padded_rows * row_numel] slot in that buffer: every rank's is
//                    the same size (padded_rows = ceil(dim0 / world)), zero-padded,
//                    so one flat all-gather / reduce-scatter serves the group.
//   unsharded param  leaf of the global shape in param_dtype; aliases the group's
//                    unsharded buffer; what forward computes with and where
//                    autograd accumulates the full gradient.
// Both leaves alias their buffers through their own TensorImpl (not views), so
// refilling a buffer does not bump the version counter autograd checks on
// tensors it saved (see [Note: FSDP and autograd] in fsdp_state.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::nn {
class Module;
}

namespace tessel::fsdp {

class FSDPParam {
 public:
  // Where the parameter is registered (a tied parameter has several entries).
  struct Registration {
    nn::Module* module;
    std::string name;
  };

  // `original` is the full parameter as the model built it.
  FSDPParam(std::string fqn, const at::Tensor& original, int shard_world, int shard_rank);

  const std::string& fqn() const { return fqn_; }
  const std::vector<int64_t>& global_shape() const { return global_shape_; }
  int64_t dim0() const { return dim0_; }
  int64_t row_numel() const { return row_numel_; }
  int64_t padded_rows() const { return padded_rows_; }
  int64_t local_rows() const { return local_rows_; }
  int64_t dim0_offset() const { return dim0_offset_; }
  int64_t padded_shard_numel() const { return padded_rows_ * row_numel_; }
  int64_t numel() const { return dim0_ * row_numel_; }

  // Element offset of this parameter's padded shard in the group's local
  // buffer; its padded unsharded block starts at world * shard_offset in the
  // unsharded buffer (parameter-major).
  int64_t shard_offset() const { return shard_offset_; }
  void set_shard_offset(int64_t offset) { shard_offset_ = offset; }
  // Where rank `rank`'s padded shard of this param starts in that unsharded
  // block over `world` ranks (the ranks' shards one after another).
  int64_t unsharded_offset(int world, int rank) const {
    return world * shard_offset_ + rank * padded_shard_numel();
  }

  // Copies this rank's chunk of `original` into `flat` from element `offset`
  // on (fp32, padding already zero; nothing to copy from a meta tensor) and
  // creates the sharded param aliasing it. `flat` is the group's local buffer
  // (offset: shard_offset()) or, when the shards live in a node-shared
  // unsharded buffer, that buffer (offset: this rank's rows of the block).
  void init_sharded(const at::Tensor& flat, int64_t offset, const at::Tensor& original);
  // Creates the unsharded param aliasing `unsharded_flat` (allocated or not).
  void init_unsharded(const at::Tensor& unsharded_flat, int world);

  const at::Tensor& sharded_param() const { return sharded_; }
  const at::Tensor& unsharded_param() const { return unsharded_; }
  std::vector<int64_t> sharded_shape() const;

  std::vector<Registration>& registrations() { return registrations_; }
  const std::vector<Registration>& registrations() const { return registrations_; }

  // Full-size gradient kept across microbatches while gradient sync is off
  // (reduce dtype); undefined otherwise.
  at::Tensor unsharded_accumulated_grad;

 private:
  std::string fqn_;
  std::vector<int64_t> global_shape_;
  int64_t dim0_ = 1;
  int64_t row_numel_ = 1;
  int64_t padded_rows_ = 0;
  int64_t local_rows_ = 0;
  int64_t dim0_offset_ = 0;
  int64_t shard_offset_ = 0;
  at::Tensor sharded_;
  at::Tensor unsharded_;
  std::vector<Registration> registrations_;
};

// A leaf tensor of `shape` (contiguous) over flat[offset ...]: a new TensorImpl
// sharing flat's storage, with its own version counter.
at::Tensor alias_leaf(const at::Tensor& flat, int64_t offset, at::IntArrayRef shape);

}  // namespace tessel::fsdp
