#include "fsdp/buffer_pool.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>

#include <deque>
#include <mutex>

#include "fsdp/fsdp_common.h"

namespace tessel::fsdp {

struct BufferPool::State {
  std::mutex mutex;
  int max_free = 0;
  std::deque<std::pair<size_t, c10::DataPtr>> free;  // oldest first
  int64_t free_bytes = 0;
};

namespace {

// What a pooled DataPtr's deleter gets: the block and where it goes back.
struct Lease {
  std::shared_ptr<BufferPool::State> pool;
  size_t bytes;
  c10::DataPtr block;
};

void give_back(void* ctx) {
  std::unique_ptr<Lease> lease(static_cast<Lease*>(ctx));
  c10::DataPtr evicted;  // freed outside the lock
  std::lock_guard<std::mutex> lock(lease->pool->mutex);
  auto& s = *lease->pool;
  if (s.max_free <= 0) return;  // the block is freed with the lease
  if (static_cast<int>(s.free.size()) >= s.max_free) {
    s.free_bytes -= static_cast<int64_t>(s.free.front().first);
    evicted = std::move(s.free.front().second);
    s.free.pop_front();
  }
  s.free_bytes += static_cast<int64_t>(lease->bytes);
  s.free.emplace_back(lease->bytes, std::move(lease->block));
}

}  // namespace

BufferPool::BufferPool(int max_free_blocks) : state_(std::make_shared<State>()) {
  state_->max_free = max_free_blocks;
}

c10::DataPtr BufferPool::allocate_bytes(size_t bytes) const {
  c10::DataPtr block;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    for (auto it = state_->free.begin(); it != state_->free.end(); ++it) {
      if (it->first != bytes) continue;
      block = std::move(it->second);
      state_->free_bytes -= static_cast<int64_t>(bytes);
      state_->free.erase(it);
      break;
    }
  }
  if (!block) block = c10::GetCPUAllocator()->allocate(bytes);
  void* data = block.get();
  const c10::Device device = block.device();
  return {data, new Lease{state_, bytes, std::move(block)}, &give_back, device};
}

at::Tensor BufferPool::empty(int64_t numel, at::ScalarType dtype) const {
  return flat_tensor_over(allocate_bytes(static_cast<size_t>(numel) * c10::elementSize(dtype)), numel, dtype);
}

int64_t BufferPool::free_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->free_bytes;
}

}  // namespace tessel::fsdp
