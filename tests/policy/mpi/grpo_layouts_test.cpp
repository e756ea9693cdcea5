// GRPO steps on every layout against one process (SPEC 8, SPEC 11), 4 ranks
// in one launch: the whole recipe (policy/grpo_recipe.h) for 3 steps, each
// generating rollouts from the weights the previous step trained, scoring
// them, computing advantages, the previous and reference log-probs, and the
// clipped loss with the KL term over micro batches. At FSDP 2, HSDP 2x2,
// TP 2 (decoding tensor-parallel), TP 2 + SP, CP 2 and TP 2 x FSDP 2 the
// rollouts' tokens, the rewards, every step's loss, grad norm and objective
// metrics, and the final parameters equal one process's.
//
// The rewards come from a rule on the response text that varies between
// rollouts of a random tiny model (policy/grpo_test_run.h).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <set>
#include <string>
#include <vector>

#include "config/loader.h"
#include "dist/communicator.h"
#include "policy/grpo_recipe.h"
#include "policy/grpo_test_run.h"
#include "policy/policy_layouts.h"
#include "support/source_tree.h"
#include "train/layout_parity.h"

namespace tessel::policy {
namespace {

struct GrpoRun {
  std::vector<train::StepMetrics> steps;
  Rollouts last;  // the last step's rollouts
  std::vector<std::pair<std::string, train::MeshParameter>> placed;
};

GrpoRun run_grpo(const testing::Layout& layout) {
  const config::Config c = testing::three_step_grpo_config(layout.overrides());
  GrpoRun out;
  train::TrainResult r = testing::run_grpo_with_byte_sums(c, layout.mesh(), &out.last);
  out.steps = std::move(r.steps);
  out.placed = train::mesh_state_dict(r.model);
  return out;
}

void expect_same(const GrpoRun& got, const GrpoRun& ref, const std::string& what) {
  testing::expect_steps_close(got.steps, ref.steps, what,
                              {.loss = 2e-5, .grad_norm = 1e-4, .metric = 5e-5, .floor = 1.0});
  EXPECT_TRUE(at::equal(got.last.responses.tokens, ref.last.responses.tokens)) << what;
  EXPECT_EQ(got.last.rewards, ref.last.rewards) << what;
  testing::expect_same_parameters(got.placed, ref.placed, what);
}

class GrpoLayouts : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks";
  }
};

TEST_F(GrpoLayouts, StepsEqualOneProcessOnEveryLayout) {
  const GrpoRun ref = run_grpo(testing::one_process());
  ASSERT_EQ(ref.steps.size(), 3u);
  // The run trains: rewards differ within a prompt's rollouts, so some
  // advantage is not 0, and the weights move.
  for (const auto& s : ref.steps) {
    EXPECT_GT(train::metric(s.objective_metrics, "reward_std"), 0.0);
    EXPECT_GT(train::metric(s.objective_metrics, "advantage_abs_mean"), 0.0);
    EXPECT_GT(s.grad_norm, 0.0);
  }
  for (const auto& layout : testing::dense_layouts())
    expect_same(run_grpo(layout), ref, "grpo at " + layout.name);
}

}  // namespace
}  // namespace tessel::policy
