// policy.dtensor_cfg.shard_optimizer_over_replicas through the trainer at 4
// ranks: HSDP 2 x 2 with each replica updating its part of the shards gives
// the single process's loss and gradient norm per step (SPEC 8) and its
// final parameters, with clipping active (max_grad_norm below every step's
// norm) and several micro batches per rank, both ways of accumulating them.
// (HSDP 2 x 1 is not a mesh tessel builds: dp_replicate_size must leave
// something to shard, mesh_layout.cpp.)
// The optimizer state is the part's only; checkpoints hold it per parameter
// shard, so they resume with or without the split.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

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

// Checkpoints keep the optimizer state per parameter shard, whatever a run
// updated: a split run's step-3 checkpoint resumes with the split and
// without it, and an unsplit run's resumes with it; each continues as the
// uninterrupted split run did (SPEC 8 tolerances), to the same parameters.
TEST_F(ReplicaSplitParity, CheckpointsResumeWithAndWithoutTheSplit) {
  namespace fs = std::filesystem;
  const std::string split = "policy.dtensor_cfg.shard_optimizer_over_replicas=true";
  const TrainResult straight = run(4, 2, {"policy.model_name=tiny-llama", split});
  ASSERT_EQ(straight.steps.size(), 6u);
  const std::vector<StepMetrics> first_three(straight.steps.begin(), straight.steps.begin() + 3);
  const fs::path root = testing::shared_dir("replica_split_ckpt");
  const auto saving = [&](const std::string& dir, int steps, bool with_split) {
    std::vector<std::string> o = {"policy.model_name=tiny-llama", "checkpointing.enabled=true",
                                  "checkpointing.checkpoint_dir='" + (root / dir).string() + "'",
                                  "checkpointing.save_period=3", "sft.max_num_steps=" + std::to_string(steps)};
    if (with_split) o.push_back(split);
    return o;
  };
  const auto expect_same_params = [&](const TrainResult& got, const std::string& what) {
    std::map<std::string, at::Tensor> want;
    for (const auto& [name, p] : mesh_state_dict(straight.model)) want[name] = p.local.detach();
    for (const auto& [name, p] : mesh_state_dict(got.model)) {
      EXPECT_TRUE(at::allclose(p.local.detach(), want.at(name), 1e-4, 1e-5)) << what << ": " << name;
    }
  };

  expect_same_steps(run(4, 2, saving("split", 3, true)).steps, first_three, "split run, saved at step 3");
  ASSERT_TRUE(fs::exists(root / "split" / "step_3" / "metadata.json"));
  // The same checkpoint resumed both ways: copied before either adds to it.
  if (dist::world()->rank() == 0) fs::copy(root / "split", root / "split_copy", fs::copy_options::recursive);
  dist::world()->barrier();
  const TrainResult split_split = run(4, 2, saving("split", 6, true));
  expect_same_steps(split_split.steps, straight.steps, "split checkpoint resumed with the split", 3);
  expect_same_params(split_split, "split checkpoint resumed with the split");
  const TrainResult split_whole = run(4, 2, saving("split_copy", 6, false));
  expect_same_steps(split_whole.steps, straight.steps, "split checkpoint resumed without the split", 3);
  expect_same_params(split_whole, "split checkpoint resumed without the split");

  run(4, 2, saving("whole", 3, false));
  const TrainResult whole_split = run(4, 2, saving("whole", 6, true));
  expect_same_steps(whole_split.steps, straight.steps, "unsplit checkpoint resumed with the split", 3);
  expect_same_params(whole_split, "unsplit checkpoint resumed with the split");
  dist::world()->barrier();
  if (dist::world()->rank() == 0) fs::remove_all(root);
}

}  // namespace
}  // namespace tessel::train
