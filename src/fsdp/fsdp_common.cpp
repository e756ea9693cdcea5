#include "fsdp/fsdp_common.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>
#include <memory>

#include "core/error.h"

namespace tessel::fsdp {

namespace {

// The deleter of shard storage: frees the allocator's own DataPtr, kept as
// the context. Its address is the mark is_shard_storage looks for.
void free_shard_storage(void* context) { delete static_cast<c10::DataPtr*>(context); }

}  // namespace

at::Tensor flat_tensor_over(c10::DataPtr data, int64_t numel, at::ScalarType dtype) {
  const size_t bytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
  const c10::Device device = data.device();
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, std::move(data), /*allocator=*/nullptr,
                       /*resizable=*/false);
  return at::empty({0}, at::TensorOptions().dtype(dtype).device(device))
      .set_(storage, 0, {numel}, {1});
}

c10::DataPtr mark_as_shard_storage(c10::DataPtr data) {
  auto block = std::make_unique<c10::DataPtr>(std::move(data));
  void* ptr = block->get();
  const c10::Device device = block->device();
  return c10::DataPtr(ptr, block.release(), &free_shard_storage, device);
}

at::Tensor new_shard_storage(int64_t numel, c10::Device device) {
  const size_t bytes = static_cast<size_t>(numel) * sizeof(float);
  // The CPU's allocator, or the device's own (CUDA's caching allocator, on
  // the current device, which the rank's setup made its own).
  c10::Allocator* allocator =
      device.is_cpu() ? c10::GetCPUAllocator() : c10::GetAllocator(device.type());
  return flat_tensor_over(mark_as_shard_storage(allocator->allocate(bytes)), numel, at::kFloat)
      .zero_();
}

bool is_shard_storage(const at::Tensor& t) {
  return t.defined() && t.has_storage() && t.storage().data_ptr().get_deleter() == &free_shard_storage;
}

int64_t tensor_bytes(const at::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

// The StorageImpl is kept (views and saved tensors point at it); only its data
// pointer changes. This is what at::native::resize_bytes_cpu does, written
// against the storage's own allocator so it works for any device.
void free_storage(const at::Tensor& t) {
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  if (impl->nbytes() == 0) return;
  TESSEL_CHECK(impl->allocator() != nullptr, "FSDP: cannot free a storage without allocator");
  impl->set_data_ptr_noswap(impl->allocator()->allocate(0));
  impl->set_nbytes(static_cast<size_t>(0));
}

bool storage_is_allocated(const at::Tensor& t) { return t.storage().nbytes() > 0; }

void alloc_storage(const at::Tensor& t, c10::Allocator* allocator) {
  c10::StorageImpl* impl = t.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>((t.storage_offset() + t.numel()) *
                                           static_cast<int64_t>(t.element_size()));
  if (impl->nbytes() >= bytes) return;
  if (allocator == nullptr) allocator = impl->allocator();
  TESSEL_CHECK(allocator != nullptr, "FSDP: cannot allocate a storage without allocator");
  impl->set_data_ptr_noswap(allocator->allocate(bytes));
  impl->set_nbytes(bytes);
}

void MemoryTracker::allocated(Buffer kind, int64_t bytes) {
  current_[static_cast<int>(kind)] += bytes;
  peak_ = std::max(peak_, current());
  peak_params_ = std::max(peak_params_, current_[0]);
}

void MemoryTracker::freed(Buffer kind, int64_t bytes) { current_[static_cast<int>(kind)] -= bytes; }

at::Tensor unallocated_flat(int64_t numel, const at::TensorOptions& options) {
  at::Tensor t = at::empty({0}, options);
  t.unsafeGetTensorImpl()->set_sizes_contiguous({numel});
  return t;
}

}  // namespace tessel::fsdp
