// A process killed in the middle of a checkpoint save (SPEC 6: writes are
// atomic), on a real 2-process `tessel train` through the built binary. The
// kill is real (SIGKILL, injected by TESSEL_TEST_CRASH_IN_SAVE, see
// train/checkpoint.cpp), once on rank 1 while rank 0 waits for its shard and
// once on rank 0 just before the rename, when the .tmp directory already
// holds every shard and metadata.json. Each time the previous step_<N> stays
// complete, latest_checkpoint() returns it, the .tmp is never picked up, and
// the next run resumes from step N and trains on exactly as an uninterrupted
// single-process run does (its losses).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "support/run_tessel.h"
#include "train/checkpoint.h"
#include "train/cli_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

namespace fs = std::filesystem;
using test_support::Result;
using test_support::run_tessel;
using ::testing::HasSubstr;

class CheckpointCrash : public testing::TrainCliFixture {
 protected:
  fs::path ckpt() const { return dir_ / "ckpt"; }

  // `tessel train` on 2 processes with the run's config, logging to
  // <dir>/<logs>; `crash` is TESSEL_TEST_CRASH_IN_SAVE's value, or empty.
  // The collective timeout is the default 300 s, and `timeout` bounds a run
  // that hangs at 120 s (exit 124): a run ending non-zero before that was
  // not waiting out a collective timeout.
  Result train_cli(const std::string& cfg, const std::string& logs, const std::string& crash) {
    return run_tessel("train " + cfg + " --nproc 2 --no-print-config logger.log_dir='" +
                          (dir_ / logs).string() + "'",
                      /*merge_stderr=*/true,
                      (crash.empty() ? "" : "TESSEL_TEST_CRASH_IN_SAVE=" + crash) +
                          " TESSEL_COLLECTIVE_TIMEOUT_S=300 timeout -k 5 120");
  }

  // A complete checkpoint of `step`: both rank files and metadata.json.
  void expect_complete(const fs::path& step_dir, int64_t step) {
    ASSERT_TRUE(fs::is_regular_file(step_dir / "metadata.json")) << step_dir;
    std::ifstream in(step_dir / "metadata.json");
    const auto meta = nlohmann::json::parse(in);
    EXPECT_EQ(meta["step"], step);
    EXPECT_EQ(meta["world_size"], 2);
    EXPECT_TRUE(fs::is_regular_file(step_dir / "rank_0.safetensors")) << step_dir;
    EXPECT_TRUE(fs::is_regular_file(step_dir / "rank_1.safetensors")) << step_dir;
  }

  // The records of the run logged to <dir>/<logs> are steps `first`..`last`
  // with the reference's losses (2 ranks against 1: fp32 reduction order).
  void expect_losses(const std::string& logs, int64_t first, int64_t last,
                     const std::vector<StepMetrics>& reference) {
    const auto records = testing::train_records((dir_ / logs).string());
    ASSERT_EQ(records.size(), static_cast<size_t>(last - first + 1)) << logs;
    for (size_t i = 0; i < records.size(); ++i) {
      const int64_t step = first + static_cast<int64_t>(i);
      EXPECT_EQ(records[i]["step"], step) << logs;
      const double ref = reference.at(static_cast<size_t>(step - 1)).loss;
      EXPECT_NEAR(records[i]["loss"].get<double>(), ref, 2e-5 * std::abs(ref))
          << logs << " step " << step;
    }
  }

  // The run died saving step `killed` (`left` is in its .tmp, so the kill
  // came mid-save), and step `previous` is what a new run would resume from.
  void expect_killed_mid_save(const Result& r, int64_t killed, const std::string& left,
                              int64_t previous) {
    EXPECT_NE(r.exit_code, 0) << r.output;
    const std::string name = "step_" + std::to_string(killed);
    EXPECT_FALSE(fs::exists(ckpt() / name));
    EXPECT_TRUE(fs::is_regular_file(ckpt() / ("." + name + ".tmp") / left))
        << "the kill did not come mid-save:\n"
        << r.output;
    expect_complete(ckpt() / ("step_" + std::to_string(previous)), previous);
    EXPECT_EQ(latest_name(), "step_" + std::to_string(previous));
  }

  // The steps of `run` in one process, for the losses of the runs above.
  std::vector<StepMetrics> reference_steps(const std::vector<std::string>& run) {
    dist::MeshSizes one;
    one.world_size = 1;
    RunOptions quiet;
    quiet.quiet = true;
    quiet.write_logs = false;
    return train(make_config(run), dist::DeviceMesh(dist::MeshLayout(one), dist::world()), quiet).steps;
  }

  std::string latest_name() const {
    const auto latest = latest_checkpoint(ckpt());
    return latest ? latest->filename().string() : "(none)";
  }
};

TEST_F(CheckpointCrash, KilledSaveLeavesPreviousCheckpointAndRunResumes) {
  // Global batch 4 = micro batch 2 x dp 2 on 2 processes (x 2 accumulation on 1).
  const std::vector<std::string> run = {"sft.max_num_steps=6", "policy.train_micro_batch_size=2"};
  const auto reference = reference_steps(run);
  ASSERT_EQ(reference.size(), 6u);

  auto with_ckpt = run;
  for (const char* o : {"checkpointing.enabled=true", "checkpointing.save_period=2",
                        "checkpointing.keep_top_k=null"}) {
    with_ckpt.emplace_back(o);
  }
  with_ckpt.push_back("checkpointing.checkpoint_dir='" + ckpt().string() + "'");
  const std::string cfg = write_config(with_ckpt);

  // 1. Rank 1 dies right after writing its step-4 shard.
  Result r = train_cli(cfg, "logs1", "4:1");
  expect_killed_mid_save(r, 4, "rank_1.safetensors", 2);
  expect_losses("logs1", 1, 4, reference);

  // 2. Resumed from step 2; rank 0 dies at the step-6 save just before the
  // rename: the .tmp is complete in all but its name and must still not count.
  r = train_cli(cfg, "logs2", "6");
  EXPECT_THAT(r.output, HasSubstr("resumed from " + (ckpt() / "step_2").string() + " (step 2)"));
  expect_killed_mid_save(r, 6, "metadata.json", 4);
  expect_complete(ckpt() / "step_2", 2);
  EXPECT_FALSE(fs::exists(ckpt() / ".step_4.tmp")) << "the step-4 save starts afresh";
  expect_losses("logs2", 3, 6, reference);

  // 3. Resumed from step 4 with no fault: finishes, and step 6 is saved.
  r = train_cli(cfg, "logs3", "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("resumed from " + (ckpt() / "step_4").string() + " (step 4)"));
  expect_losses("logs3", 5, 6, reference);
  expect_complete(ckpt() / "step_6", 6);
  EXPECT_FALSE(fs::exists(ckpt() / ".step_6.tmp"));
  EXPECT_EQ(latest_name(), "step_6");
}

// Kills around the commit marker: before metadata.json (the shards are all
// durable in the .tmp; it must not count) and after the rename (the step is
// complete though the older steps were not yet pruned: it counts, and the
// next save prunes them). A crash point that does not exist is an error.
TEST_F(CheckpointCrash, KillsAroundTheCommitMarker) {
  const std::vector<std::string> run = {"sft.max_num_steps=6", "policy.train_micro_batch_size=2"};
  const auto reference = reference_steps(run);
  auto with_ckpt = run;
  for (const char* o : {"checkpointing.enabled=true", "checkpointing.save_period=2", "checkpointing.keep_top_k=1"}) {
    with_ckpt.emplace_back(o);
  }
  auto bad = with_ckpt;
  with_ckpt.push_back("checkpointing.checkpoint_dir='" + ckpt().string() + "'");
  const std::string cfg = write_config(with_ckpt);

  Result r = train_cli(cfg, "logs1", "4:0:before_metadata");
  expect_killed_mid_save(r, 4, "rank_1.safetensors", 2);
  EXPECT_FALSE(fs::exists(ckpt() / ".step_4.tmp" / "metadata.json"));
  expect_losses("logs1", 1, 4, reference);

  r = train_cli(cfg, "logs2", "4:0:after_rename");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("resumed from " + (ckpt() / "step_2").string() + " (step 2)"));
  expect_complete(ckpt() / "step_4", 4);
  EXPECT_TRUE(fs::exists(ckpt() / "step_2")) << "keep_top_k=1 pruned before the kill";
  EXPECT_EQ(latest_name(), "step_4");
  expect_losses("logs2", 3, 4, reference);

  r = train_cli(cfg, "logs3", "");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("resumed from " + (ckpt() / "step_4").string() + " (step 4)"));
  expect_losses("logs3", 5, 6, reference);
  EXPECT_FALSE(fs::exists(ckpt() / "step_2"));
  EXPECT_FALSE(fs::exists(ckpt() / "step_4"));
  EXPECT_EQ(latest_name(), "step_6");

  bad.push_back("checkpointing.checkpoint_dir='" + (dir_ / "ckpt_bad").string() + "'");
  r = train_cli(write_config(bad), "logs4", "2:0:midway");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'midway' is neither a crash point"));
}

// A rank that throws in the middle of the save's collectives (its write
// failed) ends the whole job with its message, instead of leaving the other
// rank waiting for it until the collective timeout; the previous checkpoint
// stays the one to resume from.
TEST_F(CheckpointCrash, ThrowOnOneRankEndsTheJobWithItsMessage) {
  std::vector<std::string> run = {"sft.max_num_steps=6", "policy.train_micro_batch_size=2",
                                  "checkpointing.enabled=true", "checkpointing.save_period=2",
                                  "checkpointing.keep_top_k=null"};
  run.push_back("checkpointing.checkpoint_dir='" + ckpt().string() + "'");
  const Result r = train_cli(write_config(run), "logs", "4:1:throw");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "the job hung until the outer bound:\n" << r.output;
  EXPECT_THAT(r.output, HasSubstr("tessel: error on rank 1 of 2: injected by "
                                  "TESSEL_TEST_CRASH_IN_SAVE: the checkpoint of step 4 failed on "
                                  "rank 1"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("did not finish within")));
  EXPECT_FALSE(fs::exists(ckpt() / "step_4"));
  EXPECT_EQ(latest_name(), "step_2");
}

}  // namespace
}  // namespace tessel::train
