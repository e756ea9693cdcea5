// The trainer through the library, world 1: a short run learns (loss finite
// and falling, logs written), gradient accumulation gives the same training
// as one big micro batch (losses per step and final parameters), and bad
// input fails with a UsageError naming the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <fstream>
#include <map>
#include <string>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "fsdp/state_dict.h"
#include "models/model_config.h"
#include "models/presets.h"
#include "models/pretrained.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::TrainFixture;
using testing::full_params;
using testing::quiet;
using testing::world_mesh;




class TrainerTest : public TrainFixture {};

TEST_F(TrainerTest, ShortRunLearnsAndWritesLogs) {
  const auto mesh = world_mesh();
  RunOptions run;
  run.quiet = true;
  run.write_logs = true;
  TrainResult r = train(make_config({"sft.max_num_steps=8", "sft.val_period=4",
                                     "sft.val_batches=1", "sft.val_global_batch_size=4",
                                     "sft.val_micro_batch_size=2"}),
                        mesh, run);
  ASSERT_EQ(r.steps.size(), 8u);
  for (const auto& s : r.steps) {
    EXPECT_TRUE(std::isfinite(s.loss)) << "step " << s.step;
    EXPECT_GT(s.valid_tokens, 0);
    EXPECT_GT(s.tokens, s.valid_tokens);  // prompts are not targets
    EXPECT_GT(s.grad_norm, 0.0);
  }
  // A byte-level model starts near log(256) = 5.55 and must learn the format.
  EXPECT_NEAR(r.steps.front().loss, std::log(256.0), 0.5);
  EXPECT_LT(r.steps.back().loss, r.steps.front().loss - 1.0);
  ASSERT_EQ(r.validations.size(), 2u);  // steps 4 and 8
  EXPECT_EQ(r.validations[0].step, 4);
  EXPECT_LT(r.validations[1].loss, r.validations[0].loss);

  std::ifstream metrics(log_dir() + "/metrics.jsonl");
  std::string line;
  int train_lines = 0;
  int setup_lines = 0;
  while (std::getline(metrics, line)) {
    if (line.find("\"split\":\"setup\"") != std::string::npos) {
      // What the OS measured after load and sharding, before step 1.
      EXPECT_EQ(train_lines, 0) << "the setup record comes first";
      ++setup_lines;
      EXPECT_THAT(line, HasSubstr("\"rss_bytes\":["));
      EXPECT_THAT(line, HasSubstr("\"shard_bytes\""));
    }
    if (line.find("\"split\":\"train\"") != std::string::npos) {
      ++train_lines;
      // Every rank's peak RSS (a collective) at the first and the last step
      // only: logger.rank_metrics_period is 10, the run 8 steps.
      if (train_lines == 1 || train_lines == 8) {
        EXPECT_THAT(line, HasSubstr("\"peak_rss_bytes\":["));
      } else {
        EXPECT_THAT(line, Not(HasSubstr("peak_rss_bytes")));
      }
      EXPECT_THAT(line, HasSubstr("\"tokens_per_s\""));
    }
  }
  EXPECT_EQ(train_lines, 8);
  EXPECT_EQ(setup_lines, 1);
  std::ifstream svg(log_dir() + "/loss_curve.svg");
  std::string svg_text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_THAT(svg_text, HasSubstr("<polyline"));
  EXPECT_TRUE(std::filesystem::exists(log_dir() + "/config.yaml"));
}

// logger.rank_metrics_period 3 over 7 steps: every rank's figures (a
// collective) at steps 3 and 6, and at the first and the last step.
TEST_F(TrainerTest, RankMetricsOnlyAtTheirSteps) {
  const auto mesh = world_mesh();
  TrainResult r = train(make_config({"sft.max_num_steps=7", "+logger.rank_metrics_period=3"}), mesh, quiet());
  ASSERT_EQ(r.steps.size(), 7u);
  for (const auto& s : r.steps) {
    const bool due = s.step == 1 || s.step == 3 || s.step == 6 || s.step == 7;
    EXPECT_EQ(s.peak_rss_bytes.size(), due ? 1u : 0u) << "step " << s.step;
    if (due) {
      EXPECT_GT(s.peak_rss_bytes[0], 0);
    }
  }
}

TEST_F(TrainerTest, WarmupScheduleSetsLrPerStep) {
  const auto mesh = world_mesh();
  // The reference list form: LinearLR from 0.1 over 4 steps, then constant.
  TrainResult r = train(
      make_config({"sft.max_num_steps=6",
                   "policy.scheduler=[{name: torch.optim.lr_scheduler.LinearLR, kwargs: "
                   "{start_factor: 0.1, end_factor: 1.0, total_iters: 4}}, {name: "
                   "torch.optim.lr_scheduler.ConstantLR, kwargs: {factor: 1.0, total_iters: "
                   "100}}, {milestones: [4]}]"}),
      mesh, quiet());
  // torch: lr_s = 0.003 * (0.1 + 0.9 * s / 4) for s < 4, then 0.003.
  const double expected[] = {0.0003, 0.000975, 0.00165, 0.002325, 0.003, 0.003};
  ASSERT_EQ(r.steps.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(r.steps[i].lr, expected[i], 1e-12) << i;
}

// Splitting the global batch into micro batches must not change training:
// the loss is normalised by the global valid-token count, not per micro batch.
TEST_F(TrainerTest, AccumulationMatchesOneMicroBatch) {
  const auto mesh = world_mesh();
  TrainResult one = train(make_config({"policy.train_micro_batch_size=4"}), mesh, quiet());
  TrainResult four = train(make_config({"policy.train_micro_batch_size=1"}), mesh, quiet());
  ASSERT_EQ(one.steps.size(), four.steps.size());
  for (size_t i = 0; i < one.steps.size(); ++i) {
    EXPECT_EQ(one.steps[i].valid_tokens, four.steps[i].valid_tokens);
    EXPECT_NEAR(one.steps[i].loss, four.steps[i].loss, 1e-5 * std::abs(one.steps[i].loss))
        << "step " << i + 1;
    EXPECT_NEAR(one.steps[i].grad_norm, four.steps[i].grad_norm,
                1e-4 * one.steps[i].grad_norm)
        << "step " << i + 1;
  }
  const auto a = full_params(one);
  const auto b = full_params(four);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_TRUE(at::allclose(t, b.at(name), 1e-4, 1e-6)) << name << " max diff "
        << (t - b.at(name)).abs().max().item<float>();
  }
}

// Both accumulation modes train the same model: reduce-scatter every micro
// batch (default) and full gradients until the last one (opt-in).
TEST_F(TrainerTest, AccumulationModesAgree) {
  const auto mesh = world_mesh();
  TrainResult each = train(make_config({"policy.train_micro_batch_size=1"}), mesh, quiet());
  TrainResult last = train(
      make_config({"policy.train_micro_batch_size=1", "policy.dtensor_cfg.accumulate_unsharded_grads=true"}), mesh,
      quiet());
  ASSERT_EQ(each.steps.size(), last.steps.size());
  for (size_t i = 0; i < each.steps.size(); ++i) {
    EXPECT_NEAR(each.steps[i].loss, last.steps[i].loss, 1e-5 * std::abs(each.steps[i].loss)) << "step " << i + 1;
  }
  const auto a = full_params(each);
  const auto b = full_params(last);
  for (const auto& [name, t] : a) EXPECT_TRUE(at::allclose(t, b.at(name), 1e-4, 1e-6)) << name;
}

TEST_F(TrainerTest, ModelDirectoryWithoutWeightsIsUsageError) {
  const auto model_dir = dir_ / "config_only";
  std::filesystem::create_directories(model_dir);
  std::ofstream(model_dir / "config.json") << models::make_preset_config("tiny-llama");
  try {
    train(make_config({"policy.model_name='" + model_dir.string() + "'"}), world_mesh(), quiet());
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no weights"));
    EXPECT_THAT(e.what(), HasSubstr("tessel init-model --config"));
  }
}

// Synthetic token ids come straight from the model's vocabulary: no
// tokenizer is loaded, so a model directory without tokenizer.json and with
// a vocabulary too small for the byte-level fallback (< 256) still trains.
TEST_F(TrainerTest, SyntheticDataNeedsNoTokenizer) {
  const auto model_dir = dir_ / "vocab97";
  auto config = models::parse_model_config(models::make_preset_config("tiny-llama"), "preset");
  config.vocab_size = 97;
  models::save_initialized(config, /*seed=*/1, at::kFloat, model_dir);
  ASSERT_FALSE(std::filesystem::exists(model_dir / "tokenizer.json"));
  TrainResult r = train(make_config({"policy.model_name='" + model_dir.string() + "'",
                                     "data.train.dataset_name=synthetic",
                                     "data.validation.dataset_name=synthetic",
                                     "sft.val_period=3", "sft.val_batches=1",
                                     "sft.val_global_batch_size=4", "sft.val_micro_batch_size=4"}),
                        world_mesh(), quiet());
  ASSERT_EQ(r.steps.size(), 6u);
  for (const auto& s : r.steps) {
    EXPECT_TRUE(std::isfinite(s.loss)) << "step " << s.step;
    // Uniform random ids over 97: the loss starts and stays near log(97),
    // not log(256), so the ids were drawn from the model's own vocabulary.
    EXPECT_NEAR(s.loss, std::log(97.0), 0.5) << "step " << s.step;
  }
  EXPECT_EQ(r.validations.size(), 2u);  // steps 3 and 6
}

TEST_F(TrainerTest, MissingDatasetIsUsageError) {
  const auto mesh = world_mesh();
  try {
    train(make_config({"data.train.dataset_name='" + (dir_ / "nope.jsonl").string() + "'"}),
          mesh, quiet());
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("nope.jsonl"));
  }
}

TEST_F(TrainerTest, DynamicBatchingIsRefusedNotIgnored) {
  const auto mesh = world_mesh();
  try {
    train(make_config({"policy.dynamic_batching.enabled=true"}), mesh, quiet());
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("policy.dynamic_batching.enabled"));
  }
}

TEST_F(TrainerTest, Float16IsRefusedForWantOfLossScaling) {
  const auto mesh = world_mesh();
  try {
    train(make_config({"policy.precision=float16"}), mesh, quiet());
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("loss scaling"));
    EXPECT_THAT(e.what(), HasSubstr("bfloat16"));
  }
}

TEST_F(TrainerTest, IndivisibleBatchIsUsageError) {
  const auto mesh = world_mesh();
  try {
    train(make_config({"policy.train_global_batch_size=6", "policy.train_micro_batch_size=4"}),
          mesh, quiet());
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("6"));
    EXPECT_THAT(e.what(), HasSubstr("micro batch"));
  }
}

TEST_F(TrainerTest, UnknownKeysAreUsageErrors) {
  // A key the recipe does not have, on the command line.
  EXPECT_THROW(make_config({"sft.max_num_stepz=3"}), UsageError);
  // A typo inside a mapping read whole: the optimizer kwargs.
  const auto mesh = world_mesh();
  try {
    train(make_config({"+policy.optimizer.kwargs.weight_decai=0.1"}), mesh, quiet());
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("weight_decai"));
    EXPECT_THAT(e.what(), HasSubstr("weight_decay"));
  }
  // Every section of the recipe has a closed list of keys: data, logger,
  // checkpointing, policy and cluster too.
  for (const auto& [typo, meant] : std::vector<std::pair<std::string, std::string>>{
           {"+data.shufle=false", "shuffle"},
           {"+logger.tensorboard_enable=true", "tensorboard_enabled"},
           {"+checkpointing.save_perod=3", "save_period"},
           {"+policy.max_grad_nrm=1.0", "max_grad_norm"},
           {"+cluster.num_node=2", "num_nodes"}}) {
    try {
      train(make_config({typo}), mesh, quiet());
      ADD_FAILURE() << typo << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_THAT(e.what(), HasSubstr(meant)) << typo;
    }
  }
}

}  // namespace
}  // namespace tessel::train
