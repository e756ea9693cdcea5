// Checkpoints, world 1: a run stopped after 3 steps and resumed to 6 trains
// exactly like an uninterrupted 6-step run (losses, parameters), incomplete
// saves are never picked up, and `tessel convert`'s export loads back as a
// Hugging Face directory with the trained weights.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <map>

#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "fsdp/state_dict.h"
#include "models/pretrained.h"
#include "train/checkpoint.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

dist::DeviceMesh world_mesh() {
  dist::MeshSizes sizes;
  sizes.world_size = 1;
  return dist::DeviceMesh(dist::MeshLayout(sizes), dist::world());
}

RunOptions quiet() {
  RunOptions r;
  r.quiet = true;
  r.write_logs = false;
  return r;
}

std::map<std::string, at::Tensor> full_params(TrainResult& r) {
  std::map<std::string, at::Tensor> out;
  for (auto& [name, t] : fsdp::full_state_dict(*r.model.model)) out[name] = t;
  return out;
}

class CheckpointTest : public testing::TrainFixture {};

TEST_F(CheckpointTest, ResumeMatchesUninterruptedRun) {
  const auto mesh = world_mesh();
  const std::string ckpt = (dir_ / "ckpt").string();
  TrainResult straight = train(make_config({"sft.max_num_steps=6"}), mesh, quiet());

  const std::vector<std::string> with_ckpt = {"checkpointing.enabled=true",
                                              "checkpointing.checkpoint_dir='" + ckpt + "'",
                                              "checkpointing.save_period=2",
                                              "checkpointing.keep_top_k=1"};
  auto first_overrides = with_ckpt;
  first_overrides.push_back("sft.max_num_steps=3");
  TrainResult first = train(make_config(first_overrides), mesh, quiet());
  ASSERT_EQ(first.steps.size(), 3u);
  // keep_top_k=1: only the last save (step 3; step 2 was pruned).
  EXPECT_FALSE(std::filesystem::exists(dir_ / "ckpt" / "step_2"));
  ASSERT_TRUE(std::filesystem::exists(dir_ / "ckpt" / "step_3" / "metadata.json"));
  // Leftovers of a crashed save are ignored.
  std::filesystem::create_directories(dir_ / "ckpt" / ".step_9.tmp");
  std::filesystem::create_directories(dir_ / "ckpt" / "step_8");  // no metadata.json
  EXPECT_EQ(latest_checkpoint(ckpt)->filename(), "step_3");

  auto second_overrides = with_ckpt;
  second_overrides.push_back("sft.max_num_steps=6");
  TrainResult second = train(make_config(second_overrides), mesh, quiet());
  ASSERT_EQ(second.steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(second.steps[i].step, static_cast<int64_t>(i + 4));
    EXPECT_NEAR(second.steps[i].loss, straight.steps[i + 3].loss,
                1e-5 * std::abs(straight.steps[i + 3].loss))
        << "step " << i + 4;
  }
  const auto a = full_params(straight);
  const auto b = full_params(second);
  for (const auto& [name, t] : a) {
    EXPECT_TRUE(at::allclose(t, b.at(name), 1e-5, 1e-7)) << name;
  }

  // Export the final checkpoint and load it as a Hugging Face directory.
  const auto hf = dir_ / "hf";
  convert_checkpoint_to_hf(ckpt, hf);
  auto loaded = models::load_pretrained(hf);
  for (const auto& item : loaded->named_parameters()) {
    ASSERT_TRUE(b.count(item.key())) << item.key();
    EXPECT_TRUE(at::equal(item.value(), b.at(item.key()))) << item.key();
  }
}

}  // namespace
}  // namespace tessel::train
