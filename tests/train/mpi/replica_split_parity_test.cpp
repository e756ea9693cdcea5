// policy.dtensor_cfg.shard_optimizer_over_replicas through the trainer at 4
// ranks: HSDP 2 x 2 with each replica updating its part of the shards gives
// the single process's loss and gradient norm per step (SPEC 8) and its
// final parameters, with clipping active (max_grad_norm below every step's
// norm) and several micro batches per rank, both ways of accumulating them.
// (HSDP 2 x 1 is not a mesh tessel builds: dp_replicate_size must leave
// something to shard, mesh_layout.cpp.)
// The optimizer state is the part's only; checkpointing is refused.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "fsdp/fsdp_param_group.h"
#include "train/layout_parity.h"
#include "train/model_setup.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

using testing::expect_same_steps;
using testing::quiet;
using testing::TrainFixture;

constexpr double kMaxGradNorm = 0.05;

class ReplicaSplitParity : public TrainFixture {
 protected:
  void SetUp() override {
    TrainFixture::SetUp();
    if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks";
  }

  // 8 rows per step: 8 micro batches on one process, 2 per rank at 2 x 2.
  std::vector<std::string> base(const std::vector<std::string>& extra) const {
    std::vector<std::string> o = {"sft.max_num_steps=6", "policy.train_global_batch_size=8",
                                  "policy.train_micro_batch_size=1",
                                  "policy.max_grad_norm=" + std::to_string(kMaxGradNorm)};
    o.insert(o.end(), extra.begin(), extra.end());
    return o;
  }

  // Every rank builds every mesh (splitting is collective).
  TrainResult run(int world, int replicate, const std::vector<std::string>& extra) {
    auto o = base(extra);
    o.push_back("policy.dtensor_cfg.dp_replicate_size=" + std::to_string(replicate));
    dist::MeshSizes sizes;
    sizes.world_size = world;
    sizes.dp_replicate = replicate;
    return train(make_config(o), testing::block_mesh(sizes), quiet());
  }

  void expect_split_matches_one_process(const std::vector<std::string>& extra, const std::string& what) {
    const TrainResult ref = run(1, 1, extra);
    EXPECT_LT(ref.steps.back().loss, ref.steps.front().loss) << what;
    // Clipping is what makes every group's reduction needed before any
    // update: it must act on every step here.
    for (const auto& s : ref.steps) ASSERT_GT(s.grad_norm, kMaxGradNorm) << what << " step " << s.step;
    std::map<std::string, at::Tensor> ref_params;
    for (const auto& item : ref.model.model->named_parameters()) ref_params[item.key()] = item.value().detach();

    auto split = extra;
    split.push_back("policy.dtensor_cfg.shard_optimizer_over_replicas=true");
    for (const auto& [world, replicate] : std::vector<std::pair<int, int>>{{4, 2}}) {
      const std::string at = what + " at HSDP " + std::to_string(replicate) + " x " +
                             std::to_string(world / replicate);
      const TrainResult got = run(world, replicate, split);
      expect_same_steps(got.steps, ref.steps, at);
      // The optimizer updated the parts: every group is split, and each
      // part is half (rounded up) of the group's shards.
      ASSERT_FALSE(got.model.replica_groups.empty()) << at;
      for (const fsdp::FSDPParamGroup* g : got.model.replica_groups) {
        EXPECT_EQ(g->replica_part().numel(), (g->sharded_param_bytes() / 4 + 1) / 2) << at << " " << g->name();
      }
      // Final parameters: each rank's shards (the gathered parts) against
      // the same box of the single process's.
      for (const auto& [name, p] : mesh_state_dict(got.model)) {
        const at::Tensor expected = p.spec.local_view(ref_params.at(name), p.coords);
        EXPECT_TRUE(at::allclose(p.local.detach(), expected, 1e-4, 1e-5)) << at << ": " << name;
      }
    }
  }
};

TEST_F(ReplicaSplitParity, TiedModelMatchesOneProcess) {
  expect_split_matches_one_process({"policy.model_name=tiny-qwen2"}, "tiny-qwen2");
}

// An untied lm_head is a group of its own, and the whole gradients kept
// until the last micro batch take the other accumulation path.
TEST_F(ReplicaSplitParity, UntiedModelAccumulatingUnshardedMatchesOneProcess) {
  expect_split_matches_one_process(
      {"policy.model_name=tiny-llama", "policy.dtensor_cfg.accumulate_unsharded_grads=true"},
      "tiny-llama unsharded accumulation");
}

TEST_F(ReplicaSplitParity, KeyOffLeavesTheOptimizerWhole) {
  const TrainResult got = run(4, 2, {"policy.model_name=tiny-qwen2", "sft.max_num_steps=1"});
  EXPECT_TRUE(got.model.replica_groups.empty());
  EXPECT_EQ(got.model.optimizer_params().size(), got.model.params.size());
}

TEST_F(ReplicaSplitParity, CheckpointingIsRefused) {
  try {
    run(4, 2, {"policy.model_name=tiny-qwen2", "policy.dtensor_cfg.shard_optimizer_over_replicas=true",
               "checkpointing.enabled=true", "checkpointing.checkpoint_dir=" + (dir_ / "ckpt").string()});
    ADD_FAILURE() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("does not checkpoint yet"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessel::train
