// What TESSEL_DEVICE_KERNELS chooses (core/device_kernel_choice.h): off
// unless asked for, `fused` refused where the fused paths are not built,
// unknown values refused with the list of the known ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/device_kernel_choice.h"
#include "core/error.h"

namespace tessel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(DeviceKernelChoice, OffUnlessAskedForAndRefusesWhatItCannotDo) {
  EXPECT_FALSE(use_device_kernels(nullptr, true));
  EXPECT_FALSE(use_device_kernels("", true));
  EXPECT_FALSE(use_device_kernels("aten", true));
  EXPECT_FALSE(use_device_kernels("aten", false));
  EXPECT_FALSE(use_device_kernels(nullptr, false));
  EXPECT_TRUE(use_device_kernels("fused", true));
  EXPECT_THAT([] { use_device_kernels("fused", false); },
              ThrowsMessage<UsageError>(AllOf(HasSubstr("TESSEL_DEVICE_KERNELS=fused, but this tessel has no fused device paths"),
                                              HasSubstr("built without CUDA"), HasSubstr("no working nvcc"))));
  EXPECT_THAT([] { use_device_kernels("fast", true); },
              ThrowsMessage<UsageError>(AllOf(HasSubstr("TESSEL_DEVICE_KERNELS='fast' is unknown"),
                                              HasSubstr("aten"), HasSubstr("fused"))));
  EXPECT_THAT([] { use_device_kernels("FUSED", true); }, ThrowsMessage<UsageError>(HasSubstr("is unknown")));
}

}  // namespace
}  // namespace tessel
