// Shared by the multi-rank trainer tests: meshes of any layout on blocks of
// the world (so layouts of different world sizes share one mpirun), one
// temporary directory for all ranks, and the step-by-step comparison of a
// parallel run with the single-process run (SPEC 8).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "train/trainer.h"

namespace tessel::train::testing {

// A mesh of `sizes.world_size` ranks on this rank's block of the world: the
// world split into consecutive blocks of that many ranks, each running its
// own copy. Collective over the world.
inline dist::DeviceMesh block_mesh(dist::MeshSizes sizes) {
  const auto& world = dist::world();
  const int n = sizes.world_size;
  const dist::CommunicatorPtr group =
      n == world->size() ? world : world->split(world->rank() / n, world->rank() % n, "block" + std::to_string(n));
  return dist::DeviceMesh(dist::MeshLayout(sizes), group);
}

// One directory name shared by every rank (rank 0's choice).
inline std::filesystem::path shared_dir(const std::string& tag) {
  auto pid = at::tensor({static_cast<int64_t>(::getpid())}, at::kLong);
  dist::world()->broadcast(pid, 0);
  return std::filesystem::temp_directory_path() / ("tessel_" + tag + "_" + std::to_string(pid.item<int64_t>()));
}

// Loss and gradient norm of every step within fp32 reordering of the
// single-process run's; valid-token counts exactly. `first_ref`: the step of
// `ref` the run `got` starts at (a resumed run).
inline void expect_same_steps(const std::vector<StepMetrics>& got, const std::vector<StepMetrics>& ref,
                              const std::string& what, size_t first_ref = 0) {
  ASSERT_EQ(got.size() + first_ref, ref.size()) << what;
  for (size_t s = 0; s < got.size(); ++s) {
    const auto& r = ref[s + first_ref];
    EXPECT_EQ(got[s].step, r.step) << what;
    EXPECT_NEAR(got[s].loss, r.loss, 2e-5 * std::abs(r.loss)) << what << " step " << r.step;
    EXPECT_NEAR(got[s].grad_norm, r.grad_norm, 1e-4 * r.grad_norm) << what << " step " << r.step;
    EXPECT_EQ(got[s].valid_tokens, r.valid_tokens) << what << " step " << r.step;
  }
}

}  // namespace tessel::train::testing
