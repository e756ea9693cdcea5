// The trainer on the mixture-of-experts presets (tiny-qwen3-moe, tiny-mixtral)
// at 4 ranks, in one launch: FSDP 2 (each half of the world runs its own
// copy), FSDP 4 and HSDP 2 x 2 give the same loss (cross-entropy plus the
// load-balancing term), aux loss and gradient norm per step as one process
// over 10 steps (SPEC 8), and the same final parameters. Every parameter,
// experts and routers included, is sharded over dp_shard_cp. TP 2 and TP 2
// x FSDP 2 (attention split, routers and experts whole on every tp rank)
// match too; context parallelism and sequence parallelism over MoE models
// are refused with a message naming the way out.
//
// The aux loss is a mean over micro batches of HF's per-forward value, so the
// single-process reference uses the micro batch size of the layout it is
// compared with ([Note: the aux loss in tessel's training step]).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "train/moe_parity.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

using testing::quiet;
using testing::TrainFixture;

// `sizes` on consecutive blocks of sizes.world_size ranks of the world (each
// block runs its own copy of the layout).
dist::DeviceMesh block_mesh(const dist::MeshSizes& sizes) {
  const auto& world = dist::world();
  const int block = sizes.world_size;
  const dist::CommunicatorPtr group =
      block == world->size() ? world
                             : world->split(world->rank() / block, world->rank() % block,
                                            "moe_block" + std::to_string(block));
  return dist::DeviceMesh(dist::MeshLayout(sizes), group);
}

dist::MeshSizes sizes_of(int world_size, int dp_replicate = 1) { return testing::moe_sizes(world_size, dp_replicate, 1); }

class MoeTrainingParity : public TrainFixture {
 protected:
  void SetUp() override {
    TrainFixture::SetUp();
    if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks";
  }

  TrainResult run(const std::string& preset, const dist::MeshSizes& sizes, int micro_batch,
                  const std::vector<std::string>& extra = {}) {
    std::vector<std::string> o = testing::moe_run_overrides(preset, sizes, micro_batch);
    o.insert(o.end(), extra.begin(), extra.end());
    return train(make_config(o), block_mesh(sizes), quiet());
  }

  static void expect_same_steps(const TrainResult& got, const TrainResult& ref, const std::string& what) {
    testing::expect_same_moe_steps(got, ref, what);
    const auto want = testing::full_params(const_cast<TrainResult&>(ref));
    const auto have = testing::full_params(const_cast<TrainResult&>(got));
    ASSERT_EQ(have.size(), want.size()) << what;
    for (const auto& [name, full] : have) {
      ASSERT_TRUE(want.count(name)) << what << ": " << name;
      EXPECT_TRUE(at::allclose(full, want.at(name), 1e-4, 1e-5))
          << what << ": " << name << " max diff " << (full - want.at(name)).abs().max().item<float>();
    }
  }
};

TEST_F(MoeTrainingParity, FsdpAndHsdpMatchOneProcess) {
  for (const char* preset : {"tiny-qwen3-moe", "tiny-mixtral"}) {
    SCOPED_TRACE(preset);
    // Micro batches of 2 rows (padded: the aux loss masks the padding).
    const TrainResult ref2 = run(preset, sizes_of(1), 2);
    EXPECT_LT(ref2.steps.back().loss, ref2.steps.front().loss);
    expect_same_steps(run(preset, sizes_of(2), 2), ref2, std::string(preset) + " fsdp2");
    // Micro batches of 1 row: 4 ranks, one each.
    const TrainResult ref1 = run(preset, sizes_of(1), 1);
    expect_same_steps(run(preset, sizes_of(4), 1), ref1, std::string(preset) + " fsdp4");
    expect_same_steps(run(preset, sizes_of(4, 2), 1), ref1, std::string(preset) + " hsdp 2x2");
  }
}

TEST_F(MoeTrainingParity, TensorParallelOverTheDensePartMatchesOneProcess) {
  for (const char* preset : {"tiny-qwen3-moe", "tiny-mixtral"}) {
    SCOPED_TRACE(preset);
    // Attention (and dense MLPs) split over tp 2; routers and experts whole
    // on both tp ranks, which route every token alike.
    const std::vector<std::string> tp = {"policy.dtensor_cfg.tensor_parallel_size=2"};
    dist::MeshSizes tp2 = sizes_of(2), tp2_fsdp2 = sizes_of(4);
    tp2.tp = 2;
    tp2_fsdp2.tp = 2;
    // Steps as one process's; the parameters tp leaves whole (routers,
    // experts, norms) equal one process's on every rank.
    auto expect_same = [](TrainResult got, TrainResult ref, const std::string& what) {
      testing::expect_same_moe_steps(got, ref, what);
      const auto want = testing::full_params(ref);
      int64_t experts = 0;
      for (const auto& [name, full] : testing::full_params(got)) {
        ASSERT_TRUE(want.count(name)) << what << ": " << name;
        if (full.sizes() != want.at(name).sizes()) continue;  // a tp piece
        experts += name.find(".experts.") != std::string::npos;
        EXPECT_TRUE(at::allclose(full, want.at(name), 1e-4, 1e-5))
            << what << ": " << name << " max diff " << (full - want.at(name)).abs().max().item<float>();
      }
      EXPECT_GT(experts, 0) << what << ": the experts were split over tp";
    };
    expect_same(run(preset, tp2, 2, tp), run(preset, sizes_of(1), 2), std::string(preset) + " tp2");
    expect_same(run(preset, tp2_fsdp2, 1, tp), run(preset, sizes_of(1), 1), std::string(preset) + " tp2 x fsdp2");
  }
}

TEST_F(MoeTrainingParity, ContextParallelismAndSequenceParallelAreRefused) {
  dist::MeshSizes cp2 = sizes_of(2), tp2 = sizes_of(2);
  cp2.cp = 2;
  tp2.tp = 2;
  const std::vector<std::tuple<dist::MeshSizes, std::vector<std::string>, std::string>> layouts = {
      {cp2, {"policy.dtensor_cfg.context_parallel_size=2"}, "context_parallel_size=1"},
      {tp2, {"policy.dtensor_cfg.tensor_parallel_size=2", "policy.dtensor_cfg.sequence_parallel=true"},
       "sequence_parallel=false"}};
  for (const auto& [sizes, extra, way_out] : layouts) {
    try {
      run("tiny-mixtral", sizes, 2, extra);
      ADD_FAILURE() << "expected UsageError for " << extra.back();
    } catch (const UsageError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("mixture-of-experts"), std::string::npos) << msg;
      EXPECT_NE(msg.find(way_out), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace tessel::train
