// policy.fused_lm_head_loss through the trainer at 4 ranks: the head that
// computes its cross-entropy over vocabulary blocks (no logits) gives the
// unfused single process's loss and gradient norm per step (SPEC 8), at one
// process and under FSDP 4 and HSDP 2 x 2 (lm_head's parameters gathered for
// its forward and again for its backward), for an untied head, a tied one
// (the embedding's weight) and Gemma's softcapped logits; its validation
// loss too. Tensor parallelism, which splits the head's vocabulary, is
// refused with the key named.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "support/source_tree.h"
#include "train/layout_parity.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

using testing::expect_same_steps;
using testing::quiet;
using testing::TrainFixture;

class FusedHeadLossParity : public TrainFixture {
 protected:
  void SetUp() override {
    TrainFixture::SetUp();
    if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks";
  }

  // Every rank builds every mesh (splitting is collective).
  // 8 rows per step: 8 micro batches on one process, 2 per rank at 4 ranks.
  TrainResult run(const dist::MeshSizes& sizes, std::vector<std::string> extra) const {
    extra.insert(extra.begin(), {"policy.train_global_batch_size=8", "policy.train_micro_batch_size=1"});
    extra.push_back("policy.dtensor_cfg.dp_replicate_size=" + std::to_string(sizes.dp_replicate));
    extra.push_back("policy.dtensor_cfg.tensor_parallel_size=" + std::to_string(sizes.tp));
    return train(make_config(extra), testing::block_mesh(sizes), quiet());
  }
};

dist::MeshSizes sizes(int world, int replicate, int tp = 1) {
  dist::MeshSizes s;
  s.world_size = world;
  s.dp_replicate = replicate;
  s.tp = tp;
  return s;
}

TEST_F(FusedHeadLossParity, EveryLayoutMatchesTheUnfusedSingleProcess) {
  const std::string softcapped = "policy.model_name='" + test_support::golden_dir("gemma3_softcap").string() + "'";
  const std::vector<std::pair<std::string, std::vector<std::string>>> models = {
      {"tiny-llama (untied head)", {"sft.val_at_end=true", "sft.val_global_batch_size=8", "sft.val_micro_batch_size=1"}},
      {"tiny-qwen2 (tied head)", {"policy.model_name=tiny-qwen2"}},
      // Its 101-token vocabulary has no byte-level tokenizer: synthetic rows.
      {"gemma3_softcap (tied, softcap 2)", {softcapped, "data.train.dataset_name=synthetic", "~data.validation"}},
  };
  for (const auto& [name, model] : models) {
    const TrainResult ref = run(sizes(1, 1), model);
    // Synthetic rows are random tokens: nothing to learn, only to match.
    if (name.rfind("gemma3", 0) != 0) {
      ASSERT_LT(ref.steps.back().loss, ref.steps.front().loss) << name << ": the reference must learn";
    }
    if (name.rfind("tiny-llama", 0) == 0) {
      ASSERT_EQ(ref.validations.size(), 1u) << name;
    }
    auto fused = model;
    fused.push_back("policy.fused_lm_head_loss=true");
    for (const auto& [world, replicate] : std::vector<std::pair<int, int>>{{1, 1}, {4, 1}, {4, 2}}) {
      const std::string at = name + " fused at world " + std::to_string(world) + ", dp_replicate " +
                             std::to_string(replicate);
      const TrainResult got = run(sizes(world, replicate), fused);
      expect_same_steps(got.steps, ref.steps, at);
      ASSERT_EQ(got.validations.size(), ref.validations.size()) << at;
      for (size_t v = 0; v < ref.validations.size(); ++v) {
        EXPECT_NEAR(got.validations[v].loss, ref.validations[v].loss, 2e-5 * std::abs(ref.validations[v].loss)) << at;
        EXPECT_EQ(got.validations[v].valid_tokens, ref.validations[v].valid_tokens) << at;
      }
    }
  }
}

TEST_F(FusedHeadLossParity, TensorParallelismIsRefusedNamingTheKey) {
  std::string message;
  try {
    run(sizes(4, 1, 2), {"policy.fused_lm_head_loss=true"});
  } catch (const UsageError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("policy.fused_lm_head_loss=true needs the whole vocabulary"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace tessel::train
