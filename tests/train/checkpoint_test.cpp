// Checkpoints, world 1: a run stopped after 3 steps and resumed to 6 trains
// exactly like an uninterrupted 6-step run (losses, parameters), incomplete
// saves are never picked up, and `tessel convert`'s export loads back as a
// Hugging Face directory with the trained weights. keep_top_k keeps the best
// checkpoints by checkpointing.metric_name plus the newest, judged against
// the metrics the run reported; an unknown metric name is a UsageError.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "fsdp/state_dict.h"
#include "models/pretrained.h"
#include "train/checkpoint.h"
#include "train/hf_export.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

using testing::TrainFixture;
using testing::full_params;
using testing::quiet;
using testing::world_mesh;




// The steps of the step_<N> directories in `dir`.
std::set<int64_t> saved_steps(const std::filesystem::path& dir) {
  std::set<int64_t> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) == 0) out.insert(std::stoll(name.substr(5)));
  }
  return out;
}

nlohmann::json metadata(const std::filesystem::path& step_dir) {
  std::ifstream in(step_dir / "metadata.json");
  return nlohmann::json::parse(in);
}

// The steps of the `k` best (step, value) pairs, best first: lower values
// unless `higher`, and on equal values the later step.
std::set<int64_t> best_steps(std::vector<std::pair<int64_t, double>> values, size_t k,
                             bool higher) {
  std::sort(values.begin(), values.end(), [&](const auto& a, const auto& b) {
    if (a.second != b.second) return higher ? a.second > b.second : a.second < b.second;
    return a.first > b.first;
  });
  std::set<int64_t> out;
  for (size_t i = 0; i < k && i < values.size(); ++i) out.insert(values[i].first);
  return out;
}

class CheckpointTest : public testing::TrainFixture {
 protected:
  std::vector<std::string> saving_every_step(const std::vector<std::string>& extra) const {
    std::vector<std::string> o = {"checkpointing.enabled=true",
                                  "checkpointing.checkpoint_dir='" + ckpt().string() + "'",
                                  "checkpointing.save_period=1", "checkpointing.keep_top_k=2"};
    o.insert(o.end(), extra.begin(), extra.end());
    return o;
  }
  std::filesystem::path ckpt() const { return dir_ / "ckpt"; }
};

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
  export_checkpoint(ckpt, hf, {});
  auto loaded = models::load_pretrained(hf);
  for (const auto& item : loaded->named_parameters()) {
    ASSERT_TRUE(b.count(item.key())) << item.key();
    EXPECT_TRUE(at::equal(item.value(), b.at(item.key()))) << item.key();
  }
}

// checkpoint_must_save_by: a time limit already reached ends the run after
// its first step with a checkpoint of it; the same command without the limit
// resumes there and trains on as an uninterrupted run.
TEST_F(CheckpointTest, TimeLimitSavesAndEndsTheRunWhichThenResumes) {
  const auto mesh = world_mesh();
  const TrainResult straight = train(make_config({"sft.max_num_steps=4"}), mesh, quiet());
  const std::vector<std::string> with_ckpt = {"checkpointing.enabled=true",
                                              "checkpointing.checkpoint_dir='" + ckpt().string() + "'",
                                              "checkpointing.save_period=0", "sft.max_num_steps=4"};
  auto limited = with_ckpt;
  limited.push_back("checkpointing.checkpoint_must_save_by='00:00:00:00'");
  const TrainResult first = train(make_config(limited), mesh, quiet());
  ASSERT_EQ(first.steps.size(), 1u);
  EXPECT_EQ(saved_steps(ckpt()), std::set<int64_t>{1});
  const TrainResult rest = train(make_config(with_ckpt), mesh, quiet());
  ASSERT_EQ(rest.steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rest.steps[i].step, static_cast<int64_t>(i + 2));
    EXPECT_NEAR(rest.steps[i].loss, straight.steps[i + 1].loss, 1e-5 * std::abs(straight.steps[i + 1].loss));
  }
  // A limit that is not DD:HH:MM:SS is refused before anything runs.
  for (const char* bad : {"'3:45'", "'00:25:00:00'", "'00:01:00:0x'", "'90'"}) {
    try {
      train(make_config({std::string("checkpointing.checkpoint_must_save_by=") + bad}), mesh, quiet());
      ADD_FAILURE() << bad << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("DD:HH:MM:SS")) << bad;
    }
  }
}

TEST_F(CheckpointTest, KeepTopKByTrainLossKeepsLowestAndNewest) {
  // lr 0: the loss then depends only on each step's batch, so its order is
  // not the order of the steps and "best" differs from "most recent".
  TrainResult r =
      train(make_config(saving_every_step({"sft.max_num_steps=8", "policy.optimizer.kwargs.lr=0.0",
                                           "checkpointing.metric_name='train:loss'",
                                           "checkpointing.higher_is_better=false"})),
            world_mesh(), quiet());
  ASSERT_EQ(r.steps.size(), 8u);
  std::vector<std::pair<int64_t, double>> losses;
  for (const auto& s : r.steps) losses.emplace_back(s.step, s.loss);
  std::set<int64_t> expected = best_steps(losses, 2, /*higher=*/false);
  ASSERT_NE(expected, (std::set<int64_t>{7, 8})) << "the losses fell step by step: this run "
                                                    "cannot tell best from most recent";
  expected.insert(8);  // the newest always stays, to resume from
  EXPECT_EQ(saved_steps(ckpt()), expected);
  for (const int64_t step : saved_steps(ckpt())) {
    const auto meta = metadata(ckpt() / ("step_" + std::to_string(step)));
    const auto& reported = r.steps.at(static_cast<size_t>(step - 1));
    EXPECT_EQ(meta["metrics"]["train:loss"].get<double>(), reported.loss) << step;
    EXPECT_EQ(meta["metrics"]["train:grad_norm"].get<double>(), reported.grad_norm) << step;
    EXPECT_FALSE(meta["metrics"].contains("val:val_loss")) << "no validation ran";
  }
}

TEST_F(CheckpointTest, KeepTopKByValLossRanksStepsWithoutValidationLast) {
  // Saves at every step, validates at 2 and 4 (val_period) and at 5
  // (val_at_end: before the last save, so that checkpoint has its val loss).
  // Steps 1 and 3 have no val loss and must go first; of 2, 4 and 5 the two
  // with the highest val loss stay (higher_is_better), and 5 as the newest.
  TrainResult r =
      train(make_config(saving_every_step(
                {"sft.max_num_steps=5", "sft.val_period=2", "sft.val_at_end=true",
                 "sft.val_batches=1", "sft.val_global_batch_size=4", "sft.val_micro_batch_size=2",
                 "checkpointing.metric_name='val:loss'", "checkpointing.higher_is_better=true"})),
            world_mesh(), quiet());
  std::vector<std::pair<int64_t, double>> val_losses;
  for (const auto& v : r.validations) val_losses.emplace_back(v.step, v.loss);
  ASSERT_EQ(val_losses.size(), 3u);
  EXPECT_EQ(val_losses[0].first, 2);
  EXPECT_EQ(val_losses[1].first, 4);
  EXPECT_EQ(val_losses[2].first, 5);
  std::set<int64_t> expected = best_steps(val_losses, 2, /*higher=*/true);
  expected.insert(5);
  ASSERT_NE(expected, (std::set<int64_t>{4, 5})) << "the best are the most recent: this run "
                                                    "cannot tell them apart";
  EXPECT_EQ(saved_steps(ckpt()), expected);
  for (const auto& [step, loss] : val_losses) {
    const auto dir = ckpt() / ("step_" + std::to_string(step));
    if (!std::filesystem::exists(dir)) continue;
    // "val:loss" is recorded under the validation's own name.
    EXPECT_EQ(metadata(dir)["metrics"]["val:val_loss"].get<double>(), loss) << step;
  }
}

TEST_F(CheckpointTest, NoMetricKeepsMostRecent) {
  TrainResult r = train(
      make_config(saving_every_step({"sft.max_num_steps=4", "checkpointing.metric_name=null"})),
      world_mesh(), quiet());
  ASSERT_EQ(r.steps.size(), 4u);
  EXPECT_EQ(saved_steps(ckpt()), (std::set<int64_t>{3, 4}));
}

TEST_F(CheckpointTest, UnknownMetricNameIsUsageError) {
  for (const char* name : {"val:accuracy", "val_loss", "train:los"}) {
    try {
      train(make_config({std::string("checkpointing.metric_name='") + name + "'"}), world_mesh(),
            quiet());
      ADD_FAILURE() << name << ": expected a UsageError";
    } catch (const UsageError& e) {
      const std::string message = e.what();
      EXPECT_THAT(message, ::testing::HasSubstr(std::string("'") + name + "'"));
      for (const char* known : {"train:loss", "train:grad_norm", "val:val_loss", "val:loss"}) {
        EXPECT_THAT(message, ::testing::HasSubstr(known)) << name;
      }
      EXPECT_THAT(message, ::testing::HasSubstr("null"));
    }
  }
  EXPECT_EQ(train_options_from(make_config({"checkpointing.metric_name='val:loss'"}))
                .checkpoint.metric_name,
            "val:val_loss");
}

}  // namespace
}  // namespace tessel::train
