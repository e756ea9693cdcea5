// The trainer with expert parallelism on the MoE presets (tiny-qwen3-moe,
// tiny-mixtral) against one process, 10 steps. At 4 ranks, in one launch: EP 2
// (each half of the world runs its own copy), EP 4, and EP 2 x FSDP 2 (the
// experts FSDP-sharded over ep_shard of 2, the dense part over dp_shard of 4).
// At 8 ranks: EP 2 with HSDP 2 (the seed's dp_size = 8 / 2 = 4 admits
// dp_replicate 2; dense HSDP 2 x 4, experts over ep_shard of 4).
// Loss (cross-entropy plus the load-balancing term), aux loss and gradient
// norm per step, and the final parameters: every rank compares the experts
// it holds and the dense parameters, and the experts of the ep group
// together are all of them. Checkpointing and a dense model with ep > 1 are
// refused with messages naming the key. The presets' routing leaves experts
// without tokens from some ranks (asserted through the dispatch's counters).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "train/layout_parity.h"
#include "train/moe_parity.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

using testing::quiet;
using testing::TrainFixture;

dist::MeshSizes sizes_of(int world_size, int ep, int dp_replicate = 1) {
  return testing::moe_sizes(world_size, dp_replicate, ep);
}

class MoeExpertParallelParity : public TrainFixture {
 protected:
  TrainResult run(const std::string& preset, const dist::MeshSizes& sizes, int micro_batch,
                  const std::vector<std::string>& extra = {}) {
    std::vector<std::string> o = testing::moe_run_overrides(preset, sizes, micro_batch);
    o.insert(o.end(), extra.begin(), extra.end());
    return train(make_config(o), testing::block_mesh(sizes), quiet());
  }

  static void expect_same_steps(TrainResult& got, TrainResult& ref, const std::string& what) {
    testing::expect_same_moe_steps(got, ref, what);
    ASSERT_TRUE(got.model.ep_group) << what << ": expert parallelism was not applied";
    EXPECT_GT(got.model.expert_stats->rows_sent, 0) << what << ": no token crossed ranks";
    // Uneven routing: some rank routed no token to some expert in some layer call.
    at::Tensor empty = at::tensor({got.model.expert_stats->experts_without_tokens}, at::kLong);
    got.model.ep_group->all_reduce(empty);
    EXPECT_GT(empty.item<int64_t>(), 0) << what << ": every rank sent every expert tokens";
    const auto want = testing::full_params(ref);
    const auto have = testing::full_params(got);
    // This rank holds 1/ep of the experts; the others' are exactly the rest.
    EXPECT_EQ(have.size() + got.model.other_ranks_params.size(), want.size()) << what;
    int64_t experts_here = 0;
    for (const auto& [name, full] : have) {
      ASSERT_TRUE(want.count(name)) << what << ": " << name;
      EXPECT_FALSE(got.model.other_ranks_params.count(name)) << what << ": " << name;
      experts_here += name.find(".experts.") != std::string::npos;
      EXPECT_TRUE(at::allclose(full, want.at(name), 1e-4, 1e-5))
          << what << ": " << name << " max diff " << (full - want.at(name)).abs().max().item<float>();
    }
    at::Tensor total = at::tensor({experts_here}, at::kLong);
    got.model.ep_group->all_reduce(total);
    int64_t experts_everywhere = 0;
    for (const auto& [name, full] : want) experts_everywhere += name.find(".experts.") != std::string::npos;
    EXPECT_EQ(total.item<int64_t>(), experts_everywhere) << what << ": the ep group holds every expert once";
  }
};

TEST_F(MoeExpertParallelParity, Ep2Ep4AndEp2TimesFsdp2MatchOneProcess) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "written for 4 ranks";
  for (const char* preset : {"tiny-qwen3-moe", "tiny-mixtral"}) {
    SCOPED_TRACE(preset);
    TrainResult ref2 = run(preset, sizes_of(1, 1), 2);
    TrainResult ep2 = run(preset, sizes_of(2, 2), 2);
    expect_same_steps(ep2, ref2, std::string(preset) + " ep2");
    TrainResult ref1 = run(preset, sizes_of(1, 1), 1);
    TrainResult ep4 = run(preset, sizes_of(4, 4), 1);
    expect_same_steps(ep4, ref1, std::string(preset) + " ep4");
    TrainResult ep2_fsdp2 = run(preset, sizes_of(4, 2), 1);
    EXPECT_EQ(ep2_fsdp2.model.ep_shard_group->size(), 2);
    expect_same_steps(ep2_fsdp2, ref1, std::string(preset) + " ep2 x fsdp2");
  }
}

TEST_F(MoeExpertParallelParity, Ep2WithHsdp2MatchesOneProcess) {
  if (dist::world()->size() != 8) GTEST_SKIP() << "written for 8 ranks";
  for (const char* preset : {"tiny-qwen3-moe", "tiny-mixtral"}) {
    SCOPED_TRACE(preset);
    // Global batch 8 over dp 8: one row per rank.
    TrainResult ref = run(preset, sizes_of(1, 1), 1, {"policy.train_global_batch_size=8"});
    TrainResult hsdp = run(preset, sizes_of(8, 2, 2), 1, {"policy.train_global_batch_size=8"});
    EXPECT_EQ(hsdp.model.ep_shard_group->size(), 4);
    expect_same_steps(hsdp, ref, std::string(preset) + " ep2 x hsdp2");
  }
}

TEST_F(MoeExpertParallelParity, CheckpointingAndDenseModelsAreRefused) {
  if (dist::world()->size() != 4) GTEST_SKIP() << "written for 4 ranks";
  try {
    run("tiny-mixtral", sizes_of(2, 2), 2, {"checkpointing.enabled=true"});
    ADD_FAILURE() << "expected UsageError for checkpointing";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpointing.enabled=false"), std::string::npos) << e.what();
  }
  try {
    run("tiny-llama", sizes_of(2, 2), 2);
    ADD_FAILURE() << "expected UsageError for a dense model";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("needs a mixture-of-experts model"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessel::train
