// The switch and the routing of tessel's CUDA kernels (nn/device_kernels.h),
// as far as a machine without a GPU can see them: what TESSEL_DEVICE_KERNELS
// chooses for this build (its values: tests/core/device_kernel_choice_test.cpp),
// that host tensors never reach a kernel (the CPU paths stay as
// they are, also with the switch on), and the messages of a misuse. The
// kernels themselves are tested on a GPU: tests/gpu/device_kernels_test.cpp.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "core/error.h"
#include "nn/device_kernel_launch.h"
#include "nn/device_kernels.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"

namespace tessel::nn {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

// Sets TESSEL_DEVICE_KERNELS for a scope and puts back what was there.
class ScopedKernelChoice {
 public:
  explicit ScopedKernelChoice(const char* value) {
    if (const char* old = std::getenv("TESSEL_DEVICE_KERNELS")) old_ = old;
    ::setenv("TESSEL_DEVICE_KERNELS", value, 1);
  }
  ~ScopedKernelChoice() {
    if (old_) ::setenv("TESSEL_DEVICE_KERNELS", old_->c_str(), 1);
    else ::unsetenv("TESSEL_DEVICE_KERNELS");
  }

 private:
  std::optional<std::string> old_;
};

TEST(DeviceKernels, ThisBuildsEnvironmentDecides) {
  {
    const ScopedKernelChoice aten("aten");
    EXPECT_FALSE(device_kernels_enabled());
  }
  const ScopedKernelChoice fused("fused");
  if (device_kernels_built()) {
    EXPECT_TRUE(device_kernels_enabled());
  } else {
    EXPECT_THROW(device_kernels_enabled(), UsageError);
  }
}

TEST(DeviceKernels, HostTensorsNeverReachAKernel) {
  const at::Tensor x = at::randn({3, 8}), w = at::randn({8});
  const at::Tensor heads = at::randn({1, 2, 5, 8}), cos = at::randn({5, 8}), sin = at::randn({5, 8});
  EXPECT_FALSE(rms_norm_device_applies(x, w));
  EXPECT_FALSE(rotary_device_applies(heads, cos, sin));
  EXPECT_FALSE(swiglu_device_applies(x, x));
  for (auto dtype : {at::kBFloat16, at::kDouble}) {
    EXPECT_FALSE(rms_norm_device_applies(x.to(dtype), w.to(dtype)));
    EXPECT_FALSE(swiglu_device_applies(x.to(dtype), x.to(dtype)));
  }
  EXPECT_THAT([&] { rms_norm_device(x, w, 1e-6, false); },
              ThrowsMessage<Error>(HasSubstr("rms_norm_device: needs contiguous CUDA x")));
  EXPECT_THAT([&] { rotary_device(heads, cos, sin); }, ThrowsMessage<Error>(HasSubstr("rotary_device: needs CUDA x")));
  EXPECT_THAT([&] { swiglu_device(x, x); },
              ThrowsMessage<Error>(HasSubstr("swiglu_device: needs contiguous CUDA")));
}

// With the switch on, the CPU's modules still compute exactly what they did
// (their own float32 kernels or the composition): the switch concerns CUDA
// tensors only, also in a build that has no CUDA.
TEST(DeviceKernels, TheSwitchLeavesTheCpuPathsAlone) {
  at::manual_seed(3);
  const auto model = std::make_shared<RMSNorm>(16, 1e-6, RMSNormStyle::Llama, at::TensorOptions());
  {
    at::NoGradGuard no_grad;
    model->weight().uniform_(0.5, 1.5);
  }
  const at::Tensor x = at::randn({4, 16});
  const at::Tensor heads = at::randn({1, 2, 5, 16}), cos = at::randn({5, 16}), sin = at::randn({5, 16});
  const at::Tensor norm_before = model->call(x), rot_before = apply_rotary(heads, cos, sin);
  const at::Tensor bf16_before = model->call(x.to(at::kBFloat16));
  const ScopedKernelChoice fused("fused");
  EXPECT_TRUE(at::equal(model->call(x), norm_before));
  EXPECT_TRUE(at::equal(apply_rotary(heads, cos, sin), rot_before));
  EXPECT_TRUE(at::equal(model->call(x.to(at::kBFloat16)), bf16_before));
}

}  // namespace
}  // namespace tessel::nn
