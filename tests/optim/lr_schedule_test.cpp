#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "optim/lr_schedule.h"

namespace tessel::optim {
namespace {

TEST(LrSchedule, ConstantWithWarmupFollowsLinearLR) {
  LrScheduleOptions o{.base_lr = 1.0, .warmup_steps = 4, .warmup_start_factor = 0.2};
  // torch LinearLR(start_factor=0.2, total_iters=4): 0.2, 0.4, 0.6, 0.8, then 1.0.
  const double expected[] = {0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 1.0};
  for (int s = 0; s < 7; ++s) EXPECT_NEAR(lr_at(o, s), expected[s], 1e-12) << "step " << s;
}

TEST(LrSchedule, CosineDecaysToMinimumAndStays) {
  LrScheduleOptions o{.base_lr = 2.0, .warmup_steps = 0, .decay = LrDecay::Cosine,
                      .decay_steps = 10, .min_lr_ratio = 0.1};
  EXPECT_NEAR(lr_at(o, 0), 2.0, 1e-12);
  EXPECT_NEAR(lr_at(o, 5), 2.0 * (0.1 + 0.9 * 0.5), 1e-12);  // cos(pi/2) = 0
  EXPECT_NEAR(lr_at(o, 10), 0.2, 1e-12);
  EXPECT_NEAR(lr_at(o, 50), 0.2, 1e-12);
}

TEST(LrSchedule, LinearDecayAfterWarmup) {
  LrScheduleOptions o{.base_lr = 1.0, .warmup_steps = 2, .warmup_start_factor = 0.5,
                      .decay = LrDecay::Linear, .decay_steps = 4, .min_lr_ratio = 0.0};
  const double expected[] = {0.5, 0.75, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0};
  for (int s = 0; s < 8; ++s) EXPECT_NEAR(lr_at(o, s), expected[s], 1e-12) << "step " << s;
}

TEST(LrSchedule, ValidationNamesTheProblem) {
  EXPECT_THROW(validate(LrScheduleOptions{.decay = LrDecay::Cosine, .decay_steps = 0}), UsageError);
  EXPECT_THROW(validate(LrScheduleOptions{.warmup_steps = -1}), UsageError);
  EXPECT_THROW(parse_lr_decay("exponential"), UsageError);
  EXPECT_EQ(parse_lr_decay("cosine"), LrDecay::Cosine);
}

}  // namespace
}  // namespace tessel::optim
