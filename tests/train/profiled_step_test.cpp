// TESSEL_PROFILE_STEP's values (train/profiled_step.h), and that the CPU,
// which has no profiler range, answers a mark with false and trains on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "device/backend.h"
#include "train/profiled_step.h"

namespace tessel::train {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(ProfiledStep, APositiveStepOrNothing) {
  EXPECT_EQ(profile_step_from(nullptr), std::nullopt);
  EXPECT_EQ(profile_step_from(""), std::nullopt);
  EXPECT_EQ(profile_step_from("3"), 3);
  EXPECT_EQ(profile_step_from("120"), 120);
  for (const char* bad : {"0", "-2", "three", "3x", "1.5"}) {
    EXPECT_THAT([&] { profile_step_from(bad); },
                ThrowsMessage<UsageError>(HasSubstr("TESSEL_PROFILE_STEP='" + std::string(bad) + "'")))
        << bad;
  }
}

TEST(ProfiledStep, TheCpuHasNoProfilerRange) {
  EXPECT_FALSE(device::mark_profiler_range(c10::Device(c10::kCPU), true));
  EXPECT_FALSE(device::mark_profiler_range(c10::Device(c10::kCPU), false));
}

}  // namespace
}  // namespace tessel::train
