#include "fsdp/fsdp_param.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "tensor/chunking.h"

namespace tessel::fsdp {

at::Tensor alias_leaf(const at::Tensor& flat, int64_t offset, at::IntArrayRef shape) {
  TESSEL_CHECK(flat.is_contiguous() && flat.dim() == 1, "FSDP: alias_leaf needs a flat buffer");
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
    strides[static_cast<size_t>(d)] =
        strides[static_cast<size_t>(d) + 1] * shape[static_cast<size_t>(d) + 1];
  }
  // A TensorImpl made directly rather than through set_(), which would grow a
  // storage that holds no memory yet (unallocated_flat) to fit the view.
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(flat.storage()), flat.key_set(), flat.dtype());
  impl->set_sizes_and_strides(shape, strides);
  impl->set_storage_offset(flat.storage_offset() + offset);
  return at::Tensor(std::move(impl));
}

FSDPParam::FSDPParam(std::string fqn, const at::Tensor& original, int shard_world, int shard_rank)
    : fqn_(std::move(fqn)),
      global_shape_(original.sizes().vec()) {
  TESSEL_CHECK(
      at::isFloatingType(original.scalar_type()),
      "fully_shard: parameter '{}' has dtype {}; FSDP shards floating-point parameters only", fqn_,
      std::string(c10::toString(original.scalar_type())));
  if (original.dim() > 0) {
    dim0_ = original.size(0);
    row_numel_ = dim0_ > 0 ? original.numel() / dim0_ : 1;
    if (dim0_ == 0) {
      row_numel_ = 1;
      for (int64_t d = 1; d < original.dim(); ++d) row_numel_ *= original.size(d);
    }
  }
  padded_rows_ = tensor::max_chunk(dim0_, shard_world);
  local_rows_ = tensor::chunk_size(dim0_, shard_world, shard_rank);
  dim0_offset_ = tensor::chunk_offset(dim0_, shard_world, shard_rank);
}

std::vector<int64_t> FSDPParam::sharded_shape() const {
  std::vector<int64_t> shape{local_rows_};
  for (size_t d = 1; d < global_shape_.size(); ++d) shape.push_back(global_shape_[d]);
  return shape;
}

void FSDPParam::init_sharded(const at::Tensor& flat, int64_t offset, const at::Tensor& original) {
  at::NoGradGuard no_grad;
  sharded_ = alias_leaf(flat, offset, sharded_shape());
  // A model built on the meta device has no values yet: its shards stay zero
  // until they are filled (train/shard_loading.h).
  if (local_rows_ > 0 && !original.is_meta()) {
    at::Tensor full = original.detach().reshape({dim0_, row_numel_});
    sharded_.view({local_rows_, row_numel_}).copy_(full.narrow(0, dim0_offset_, local_rows_));
  }
  sharded_.set_requires_grad(true);
}

void FSDPParam::init_unsharded(const at::Tensor& unsharded_flat, int world) {
  unsharded_ = alias_leaf(unsharded_flat, unsharded_offset(world, 0), global_shape_);
  unsharded_.set_requires_grad(true);
}

}  // namespace tessel::fsdp
