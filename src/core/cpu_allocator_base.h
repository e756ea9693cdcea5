// The one place where tessel's CPU allocators meet c10::Allocator, whose
// interface changed between the libtorch versions tessel builds against:
// 1.13 declares `allocate` const; 2.x declares it non-const and adds a pure
// `copy_data`. An allocator derives from this and implements
// `allocate_bytes`; the version-specific overrides live here only.
#pragma once

#include <c10/core/Allocator.h>
#include <torch/version.h>

#include <cstddef>

namespace tessel {

class CpuAllocatorBase : public c10::Allocator {
 public:
  virtual c10::DataPtr allocate_bytes(size_t bytes) const = 0;

#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t bytes) override { return allocate_bytes(bytes); }
  void copy_data(void* dest, const void* src, size_t count) const override { default_copy_data(dest, src, count); }
#else
  c10::DataPtr allocate(size_t bytes) const override { return allocate_bytes(bytes); }
#endif
};

}  // namespace tessel
