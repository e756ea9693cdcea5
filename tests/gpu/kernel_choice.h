// TESSEL_DEVICE_KERNELS set for a scope (core/device_kernel_choice.h reads
// it at each call), unset after.
#pragma once

#include <cstdlib>

namespace tessel::gpu_testing {

struct KernelChoice {
  explicit KernelChoice(const char* value) { ::setenv("TESSEL_DEVICE_KERNELS", value, 1); }
  ~KernelChoice() { ::unsetenv("TESSEL_DEVICE_KERNELS"); }
  KernelChoice(const KernelChoice&) = delete;
  KernelChoice& operator=(const KernelChoice&) = delete;
};

}  // namespace tessel::gpu_testing
