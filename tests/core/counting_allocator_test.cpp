// The measuring wrapper around ATen's CPU allocator (core/counting_allocator.h):
// it counts what tensors hold, frees what it counted, and serves c10's
// raw_allocate (which ATen's own kernels call for scratch) as the allocator
// it wraps does. Installing it is process-wide and permanent: the wrapper
// passes every allocation through, so the other tests of this program run
// on it unchanged.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include <cstdlib>

#include "core/counting_allocator.h"
#include "core/error.h"

namespace tessel {
namespace {

TEST(CountingCpuAllocator, CountsLiveBytesAndTheirPeak) {
  CountingCpuAllocator::install();
  ASSERT_TRUE(CountingCpuAllocator::installed());
  const int64_t before = CountingCpuAllocator::live_bytes();
  CountingCpuAllocator::reset_peak();
  {
    at::Tensor a = at::empty({1000}, at::kFloat);
    EXPECT_EQ(CountingCpuAllocator::live_bytes() - before, 4000);
    at::Tensor b = at::empty({250}, at::kDouble);
    EXPECT_EQ(CountingCpuAllocator::live_bytes() - before, 6000);
  }
  EXPECT_EQ(CountingCpuAllocator::live_bytes(), before);
  EXPECT_EQ(CountingCpuAllocator::peak_bytes() - before, 6000);
}

TEST(CountingCpuAllocator, ServesRawAllocationsAndKeepsAlignment) {
  CountingCpuAllocator::install();
  c10::Allocator* cpu = c10::GetCPUAllocator();
  const int64_t before = CountingCpuAllocator::live_bytes();
  void* p = cpu->raw_allocate(1 << 20);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % c10::gAlignment, 0u);
  EXPECT_EQ(CountingCpuAllocator::live_bytes() - before, 1 << 20);
  static_cast<char*>(p)[(1 << 20) - 1] = 1;  // every byte is the caller's
  cpu->raw_deallocate(p);
  EXPECT_EQ(CountingCpuAllocator::live_bytes(), before);
  // bf16 products take their scratch through raw_allocate (the run that
  // first counted a bf16 step stopped on c10's assertion there).
  const at::Tensor x = at::randn({64, 96}).to(at::kBFloat16);
  const at::Tensor w = at::randn({48, 96}).to(at::kBFloat16);
  const at::Tensor y = at::linear(x, w);
  EXPECT_TRUE(at::allclose(y.to(at::kFloat), at::linear(x.to(at::kFloat), w.to(at::kFloat)), 0.05, 0.5));
}

TEST(CountingCpuAllocator, TheEnvironmentSwitchTakesZeroOrOne) {
  ::setenv("TESSEL_COUNT_TENSOR_BYTES", "yes", 1);
  EXPECT_THROW(CountingCpuAllocator::install_from_env(), UsageError);
  ::setenv("TESSEL_COUNT_TENSOR_BYTES", "0", 1);
  EXPECT_NO_THROW(CountingCpuAllocator::install_from_env());
  ::unsetenv("TESSEL_COUNT_TENSOR_BYTES");
}

}  // namespace
}  // namespace tessel
