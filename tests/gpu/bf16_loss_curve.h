// What "bf16 follows the fp32 loss curve" means in the GPU tests (issue 39:
// 50 steps of tiny-llama, policy.precision=bfloat16 against float32): each
// step within 1e-2 relative while the loss falls steeply (the first 25: from
// 5.6 to 1.2), and every 10 steps' mean within 2e-2 relative over all 50.
//
// Not each of the 50 steps within 1e-2: once the tiny model memorises its 24
// prompts (losses under 1, changing with the batch), bf16's rounding moves
// single steps by several percent either way while both curves fall alike.
// Seen on the CPU (the same runs on the host): steps 1-25 within 0.35%,
// steps 26-50 from -4.4% to +4.8%, their 10-step means -0.4% and +0.9%, the
// last losses 0.361 (fp32) and 0.357 (bf16).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "train/trainer.h"

namespace tessel::gpu_testing {

inline void expect_bf16_follows_fp32(const train::TrainResult& bf16, const train::TrainResult& fp32) {
  ASSERT_EQ(fp32.steps.size(), 50U);
  ASSERT_EQ(bf16.steps.size(), 50U);
  // The whole curve in the log, pass or fail: what a device's kernels (split-K
  // reductions, flash's bf16 probabilities) do to it is known only from a run.
  std::string deviations = "bf16 against fp32, per step (relative):";
  for (size_t s = 0; s < 50; ++s) {
    deviations += fmt::format(" {:+.4f}", bf16.steps[s].loss / fp32.steps[s].loss - 1.0);
  }
  std::printf("%s\n", deviations.c_str());
  for (size_t s = 0; s < 25; ++s) {
    EXPECT_NEAR(bf16.steps[s].loss, fp32.steps[s].loss, 1e-2 * fp32.steps[s].loss) << "step " << s + 1;
  }
  auto mean_loss = [](const train::TrainResult& r, size_t first) {
    double sum = 0.0;
    for (size_t s = first; s < first + 10; ++s) sum += r.steps[s].loss;
    return sum / 10.0;
  };
  for (size_t first = 0; first < 50; first += 10) {
    const double want = mean_loss(fp32, first);
    EXPECT_NEAR(mean_loss(bf16, first), want, 2e-2 * want) << "mean of steps " << first + 1 << "-" << first + 10;
  }
}

}  // namespace tessel::gpu_testing
