// Shared by the MoE parity tests (tests/train/mpi/moe_training_parity_test.cpp,
// tests/train/ep_mpi/): the overrides of a 10-step run of an MoE preset on a
// layout, and the per-step comparison with one process.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "dist/mesh_layout.h"
#include "train/trainer.h"

namespace tessel::train::testing {

inline dist::MeshSizes moe_sizes(int world_size, int dp_replicate, int ep) {
  dist::MeshSizes s;
  s.world_size = world_size;
  s.dp_replicate = dp_replicate;
  s.ep = ep;
  s.v2 = true;
  return s;
}

inline std::vector<std::string> moe_run_overrides(const std::string& preset, const dist::MeshSizes& sizes,
                                                  int micro_batch) {
  return {"policy.model_name=" + preset,
          "sft.max_num_steps=10",
          "policy.train_global_batch_size=4",
          "policy.train_micro_batch_size=" + std::to_string(micro_batch),
          "policy.dtensor_cfg._v2=true",
          "policy.dtensor_cfg.dp_replicate_size=" + std::to_string(sizes.dp_replicate),
          "policy.dtensor_cfg.expert_parallel_size=" + std::to_string(sizes.ep)};
}

// Loss (with the load-balancing term), aux loss, gradient norm and tokens of
// every step as one process's. `first_ref`: the step of `ref` the run `got`
// starts at (a resumed run).
inline void expect_same_moe_steps(const std::vector<StepMetrics>& got, const std::vector<StepMetrics>& ref,
                                  const std::string& what, size_t first_ref = 0) {
  ASSERT_EQ(got.size() + first_ref, ref.size()) << what;
  for (size_t s = 0; s < got.size(); ++s) {
    const auto &g = got[s], &r = ref[s + first_ref];
    EXPECT_EQ(g.step, r.step) << what;
    EXPECT_GT(r.aux_loss, 0.0) << what << ": the presets train with the load-balancing loss";
    EXPECT_NEAR(g.loss, r.loss, 2e-5 * std::abs(r.loss)) << what << " step " << r.step;
    EXPECT_NEAR(g.aux_loss, r.aux_loss, 2e-5 * r.aux_loss) << what << " step " << r.step;
    EXPECT_NEAR(g.grad_norm, r.grad_norm, 1e-4 * r.grad_norm) << what << " step " << r.step;
    EXPECT_EQ(g.valid_tokens, r.valid_tokens) << what << " step " << r.step;
  }
}

inline void expect_same_moe_steps(const TrainResult& got, const TrainResult& ref, const std::string& what) {
  expect_same_moe_steps(got.steps, ref.steps, what);
}

}  // namespace tessel::train::testing
