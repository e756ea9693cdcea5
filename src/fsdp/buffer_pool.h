// BufferPool: reusable flat buffers for what the decoder layers' groups
// allocate and free on every pass (unsharded parameter storage, packed
// reduce-scatter inputs). Every layer of a decoder has the same size, so a
// handful of blocks serves the whole model: "free" returns a block to the
// pool instead of to the C library. That keeps the process's
// resident set at what is live (glibc's heap fragments badly when
// layer-sized buffers are freed between long-lived activations: on a
// 48-layer model the heap grew to 3x the live tensors in one forward) and
// spares the page faults of fresh memory on every layer.
//
// The pool keeps at most `max_free_blocks` free blocks, each reused only for
// a request of exactly its size; beyond that a freed block goes back to the
// CPU allocator. Blocks handed out return on their own when the last tensor
// using them dies (on any thread); the pool's state lives as long as any
// block does. One pool per root (FSDPContext), not process-wide.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>

#include "core/cpu_allocator_base.h"

namespace tessel::fsdp {

class BufferPool : public CpuAllocatorBase {
 public:
  explicit BufferPool(int max_free_blocks = 2);

  // Memory for a storage of `bytes` (a free block of that size if there is one).
  c10::DataPtr allocate_bytes(size_t bytes) const override;
  // A new flat tensor [numel] of `dtype` on pooled memory (contents undefined).
  at::Tensor empty(int64_t numel, at::ScalarType dtype) const;
  // Bytes of free blocks held for reuse.
  int64_t free_bytes() const;

  // Shared by the pool and every block it handed out (buffer_pool.cpp).
  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tessel::fsdp
