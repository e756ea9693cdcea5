// RL policies on the GPU (SPEC 10, SPEC 11): at one process, GRPO (rollouts
// generated on the device from the policy being trained, scored, the clipped
// loss with its KL term) and DPO (the reference policy swapped in on the
// device) run as on the CPU: the same sampled tokens and rewards (sampling's
// draws do not depend on the device, policy/sampling.h), every step's loss
// and metrics within 1e-4 relative, the gradient norms within 1e-3. Skipped
// without a CUDA device.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "config/loader.h"
#include "gpu/gpu_world.h"
#include "policy/dpo_recipe.h"
#include "policy/grpo_test_run.h"
#include "support/source_tree.h"
#include "train/trainer.h"

namespace tessel::gpu_testing {
namespace {

// Each step's loss and computed metrics within 1e-4 relative (of at least
// 1e-2), gradient norms within 1e-3, the same valid tokens.
constexpr policy::testing::StepTolerance kDeviceToHost{
    .loss = 1e-4, .grad_norm = 1e-3, .metric = 1e-4, .floor = 1e-2, .grad_norm_abs = 1e-7};

class GpuPolicy : public ::testing::Test {
 protected:
  void SetUp() override {
    TESSEL_REQUIRE_GPU();
    if (dist::world()->size() != 1) GTEST_SKIP() << "runs at one process";
  }
};

TEST_F(GpuPolicy, GrpoOnTheGpuFollowsTheCpu) {
  const config::Config c = policy::testing::three_step_grpo_config({});
  policy::Rollouts on_cpu, on_gpu;
  const train::TrainResult cpu =
      policy::testing::run_grpo_with_byte_sums(c, single_rank_mesh(false), &on_cpu);
  const train::TrainResult gpu =
      policy::testing::run_grpo_with_byte_sums(c, single_rank_mesh(true), &on_gpu);
  ASSERT_EQ(cpu.steps.size(), 3U);
  // The run trains (rewards differ within a prompt's rollouts).
  EXPECT_GT(train::metric(cpu.steps.back().objective_metrics, "advantage_abs_mean"), 0.0);
  policy::testing::expect_steps_close(gpu.steps, cpu.steps, "GRPO on " + device_path(),
                                      kDeviceToHost);
  EXPECT_TRUE(at::equal(on_gpu.responses.tokens, on_cpu.responses.tokens))
      << "the last step's sampled tokens";
  EXPECT_EQ(on_gpu.rewards, on_cpu.rewards);
}

TEST_F(GpuPolicy, DpoOnTheGpuFollowsTheCpu) {
  const config::Config c = config::load_config(
      test_support::source_tree() / "examples" / "configs" / "dpo.yaml",
      {"policy.model_name=tiny-llama", "dpo.max_num_steps=6", "dpo.val_period=0",
       "dpo.val_at_start=false", "dpo.val_at_end=false", "dpo.reference_policy_kl_penalty=0.1",
       "policy.train_global_batch_size=16", "policy.train_micro_batch_size=8",
       "policy.max_total_sequence_length=64", "policy.optimizer.kwargs.lr=0.001",
       "policy.scheduler=null", "checkpointing.enabled=false"});
  train::RunOptions quiet;
  quiet.quiet = true;
  quiet.write_logs = false;
  const train::TrainResult cpu = policy::train_dpo(c, single_rank_mesh(false), quiet);
  const train::TrainResult gpu = policy::train_dpo(c, single_rank_mesh(true), quiet);
  ASSERT_EQ(cpu.steps.size(), 6U);
  // The policy starts as its reference: every reward 0 (the same forward on
  // the same weights; a bound, not equality, should the device's kernels
  // choose differently between the two passes).
  EXPECT_NEAR(train::metric(gpu.steps[0].objective_metrics, "reward_margin"), 0.0, 1e-6);
  // Step 1's "accuracy" (the share of pairs whose margin is above 0) is then
  // the sign of rounding: 0 where the two passes agree to the bit, as on the
  // CPU, any share of the pairs where a device's kernels differ by one ulp;
  // compared from step 2 on, where the margins have grown.
  std::vector<train::StepMetrics> got = gpu.steps, want = cpu.steps;
  for (std::vector<train::StepMetrics>* steps : {&got, &want}) {
    std::erase_if(steps->front().objective_metrics, [](const auto& m) { return m.first == "accuracy"; });
  }
  policy::testing::expect_steps_close(got, want, "DPO on " + device_path(), kDeviceToHost);
}

}  // namespace
}  // namespace tessel::gpu_testing
