// TESSEL_DEVICE_KERNELS set for a scope (core/device_kernel_choice.h reads
// it at each call), unset after; and the skip of a test that needs tessel's
// own kernels (`fused` refuses to switch on without them).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

#include "nn/device_kernel_launch.h"

#define TESSEL_REQUIRE_KERNELS()                                                                   \
  if (!::tessel::nn::device_kernels_built()) {                                                     \
    GTEST_SKIP() << "this CUDA build has no kernels of tessel's own (no working nvcc at configure)"; \
  }

namespace tessel::gpu_testing {

struct KernelChoice {
  explicit KernelChoice(const char* value) { ::setenv("TESSEL_DEVICE_KERNELS", value, 1); }
  ~KernelChoice() { ::unsetenv("TESSEL_DEVICE_KERNELS"); }
  KernelChoice(const KernelChoice&) = delete;
  KernelChoice& operator=(const KernelChoice&) = delete;
};

}  // namespace tessel::gpu_testing
