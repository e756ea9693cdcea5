// policy.scheduler in the reference's list form and the simple forms, checked
// against rates computed by hand from torch.optim.lr_scheduler's formulas.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/loader.h"
#include "core/error.h"
#include "optim/lr_schedule.h"
#include "train/lr_schedule_config.h"

namespace tessel::train {
namespace {

using ::testing::HasSubstr;

config::Config yaml(const char* text) { return config::parse_yaml(text).at("scheduler"); }

TEST(LrScheduleConfig, ReferenceWarmupThenConstant) {
  const auto o = lr_schedule_from(yaml(R"(
scheduler:
  - name: "torch.optim.lr_scheduler.LinearLR"
    kwargs: {start_factor: 0.1, end_factor: 1.0, total_iters: 10}
  - name: "torch.optim.lr_scheduler.ConstantLR"
    kwargs: {factor: 1.0, total_iters: 10000000000}
  - milestones: [10]
)"),
                                  2.0e-5);
  EXPECT_EQ(o.warmup_steps, 10);
  EXPECT_EQ(o.decay, optim::LrDecay::Constant);
  // LinearLR: lr_s = base * (0.1 + 0.9 * s / 10)
  EXPECT_NEAR(optim::lr_at(o, 0), 2.0e-6, 1e-18);
  EXPECT_NEAR(optim::lr_at(o, 5), 2.0e-5 * 0.55, 1e-18);
  EXPECT_NEAR(optim::lr_at(o, 10), 2.0e-5, 1e-18);
  EXPECT_NEAR(optim::lr_at(o, 1000), 2.0e-5, 1e-18);
}

TEST(LrScheduleConfig, WarmupThenCosine) {
  const auto o = lr_schedule_from(yaml(R"(
scheduler:
  - {name: LinearLR, kwargs: {start_factor: 0.5, end_factor: 1.0, total_iters: 2}}
  - {name: CosineAnnealingLR, kwargs: {T_max: 4, eta_min: 0.0}}
  - {milestones: [2]}
)"),
                                  1.0);
  EXPECT_NEAR(optim::lr_at(o, 1), 0.75, 1e-12);
  EXPECT_NEAR(optim::lr_at(o, 2), 1.0, 1e-12);
  EXPECT_NEAR(optim::lr_at(o, 4), 0.5, 1e-12);  // (1 + cos(pi/2)) / 2
  EXPECT_NEAR(optim::lr_at(o, 6), 0.0, 1e-12);
}

TEST(LrScheduleConfig, SimpleForms) {
  EXPECT_EQ(lr_schedule_from(config::Config::null(), 0.1).decay, optim::LrDecay::Constant);
  EXPECT_NEAR(optim::lr_at(lr_schedule_from(config::Config::null(), 0.1), 7), 0.1, 1e-15);
  const auto o = lr_schedule_from(
      yaml("scheduler: {warmup_steps: 2, warmup_start_factor: 0.0, decay: linear, decay_steps: "
           "2, min_lr_ratio: 0.5}"),
      1.0);
  EXPECT_NEAR(optim::lr_at(o, 1), 0.5, 1e-12);
  EXPECT_NEAR(optim::lr_at(o, 3), 0.75, 1e-12);
  EXPECT_NEAR(optim::lr_at(o, 9), 0.5, 1e-12);
}

TEST(LrScheduleConfig, RejectsWhatItCannotExpress) {
  try {
    lr_schedule_from(yaml(R"(
scheduler:
  - {name: LinearLR, kwargs: {start_factor: 0.1, end_factor: 1.0, total_iters: 5}}
  - {name: ConstantLR, kwargs: {factor: 1.0}}
  - {milestones: [10]}
)"),
                     1.0);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("milestone"));
  }
  EXPECT_THROW(lr_schedule_from(yaml("scheduler: [{name: StepLR, kwargs: {step_size: 3}}]"), 1.0),
               UsageError);
  EXPECT_THROW(lr_schedule_from(yaml("scheduler: {warmup: 3}"), 1.0), UsageError);
}

}  // namespace
}  // namespace tessel::train
