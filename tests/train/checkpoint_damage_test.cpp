// A checkpoint damaged after a successful save (a flipped byte, a truncated
// or missing file, an unreadable metadata.json) is caught before loading,
// with a UsageError naming the file and the remedy: the exact
// checkpointing.resume_from of the previous checkpoint. Following it resumes
// from that step and trains on exactly as the uninterrupted run did. One
// saved before tessel recorded checksums loads, with a warning that it is
// unverified.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/checkpoint.h"
#include "train/hf_export.h"
#include "train/checkpoint_manifest.h"
#include "train/checkpoint_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::quiet;
using testing::world_mesh;

class CheckpointDamage : public testing::CheckpointFixture {
 protected:
  // Steps 1-4, saving step_2 and step_4.
  void save_two_steps() {
    train(make_config(saving({"sft.max_num_steps=4"})), world_mesh(), quiet());
    ASSERT_TRUE(fs::is_regular_file(step(4) / "metadata.json"));
    ASSERT_TRUE(fs::is_regular_file(step(2) / "metadata.json"));
  }
  // The UsageError resuming (to step 6) gives.
  std::string resume_error() {
    try {
      train(make_config(saving({"sft.max_num_steps=6"})), world_mesh(), quiet());
    } catch (const UsageError& e) {
      return e.what();
    }
    ADD_FAILURE() << "the damaged checkpoint was loaded";
    return "";
  }
  std::string remedy() const {
    return "++checkpointing.resume_from=" + step(2).string();
  }
};

void flip_byte(const fs::path& file, std::streamoff at) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x10);
  f.seekp(at);
  f.write(&c, 1);
  ASSERT_TRUE(f.good()) << file;
}

TEST_F(CheckpointDamage, FlippedByteInAShardIsNamedAndTheRemedyWorks) {
  const TrainResult straight = train(make_config({"sft.max_num_steps=6"}), world_mesh(), quiet());
  save_two_steps();
  const fs::path shard = step(4) / "rank_0.safetensors";
  flip_byte(shard, static_cast<std::streamoff>(fs::file_size(shard) / 2));  // in the tensor data
  const std::string message = resume_error();
  EXPECT_THAT(message, HasSubstr(shard.string() + " has xxHash64"));
  EXPECT_THAT(message, HasSubstr("its content changed after the save"));
  EXPECT_THAT(message, HasSubstr(remedy()));

  // The remedy, as the message words it: resume from step 2, train to 6.
  const TrainResult resumed = train(
      make_config(saving({"sft.max_num_steps=6", remedy().substr(2)})), world_mesh(), quiet());
  ASSERT_EQ(resumed.steps.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const auto& s = resumed.steps[i];
    EXPECT_EQ(s.step, static_cast<int64_t>(i + 3));
    EXPECT_NEAR(s.loss, straight.steps[i + 2].loss, 1e-5 * std::abs(straight.steps[i + 2].loss))
        << "step " << s.step;
  }
  // The damaged step was written again, whole.
  EXPECT_NO_THROW(verify_checkpoint(step(4)));
}

TEST_F(CheckpointDamage, TruncatedShardIsNamed) {
  save_two_steps();
  const fs::path shard = step(4) / "rank_0.safetensors";
  const auto size = fs::file_size(shard);
  fs::resize_file(shard, size - 100);
  const std::string message = resume_error();
  EXPECT_THAT(message, HasSubstr(shard.string() + " holds " + std::to_string(size - 100) +
                                 " bytes but the save wrote " + std::to_string(size) +
                                 " (truncated)"));
  EXPECT_THAT(message, HasSubstr(remedy()));
}

TEST_F(CheckpointDamage, MissingFileAndBrokenMetadataAreNamed) {
  save_two_steps();
  fs::remove(step(4) / "config.yaml");
  EXPECT_THAT(resume_error(), HasSubstr((step(4) / "config.yaml").string() + " is missing"));
  std::ofstream(step(4) / "metadata.json") << "{\"step\": 4, \"files\": {";  // cut short
  const std::string message = resume_error();
  EXPECT_THAT(message, HasSubstr((step(4) / "metadata.json").string() + " is not valid JSON"));
  EXPECT_THAT(message, HasSubstr(remedy()));
}

TEST_F(CheckpointDamage, OldestCheckpointDamagedSaysThereIsNoEarlierOne) {
  save_two_steps();
  fs::remove_all(step(4));
  fs::resize_file(step(2) / "rank_0.safetensors", 10);
  EXPECT_THAT(resume_error(), HasSubstr("There is no earlier complete checkpoint in " +
                                        ckpt().string()));
}

TEST_F(CheckpointDamage, ConvertChecksTheFilesToo) {
  save_two_steps();
  flip_byte(step(4) / "rank_0.safetensors", 200);
  EXPECT_THROW(export_checkpoint(step(4), dir_ / "hf", {}), UsageError);
}

TEST_F(CheckpointDamage, CheckpointWithoutChecksumsLoadsWithAWarning) {
  // As an older tessel wrote it: metadata.json without the "files" list.
  save_two_steps();
  nlohmann::json meta;
  std::ifstream(step(4) / "metadata.json") >> meta;
  ASSERT_TRUE(meta.contains("files"));
  meta.erase("files");
  std::ofstream(step(4) / "metadata.json") << meta.dump();
  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(verify_checkpoint(step(4)));
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("checkpoint " + step(4).string() + " lists no file sizes or checksums"));
  EXPECT_THAT(said, HasSubstr("loading it unverified"));
  // A checkpoint with its list says nothing.
  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(verify_checkpoint(step(2)));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST_F(CheckpointDamage, ResumeFromMustBeACompleteCheckpoint) {
  try {
    train(make_config(saving({"checkpointing.resume_from='" + (dir_ / "nowhere").string() + "'"})),
          world_mesh(), quiet());
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("checkpointing.resume_from=" + (dir_ / "nowhere").string() +
                                    ": not a complete checkpoint"));
  }
}

}  // namespace
}  // namespace tessel::train
