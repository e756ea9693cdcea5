// The checkpoint a run resumes from is rank 0's choice on every rank, even
// when the ranks see different checkpoint directories (here each rank looks
// at its own, holding other steps: what a shared file system's stale caches
// or a save between two listings can show). Its files are checked split over
// the ranks, and a damaged one makes every rank throw the same UsageError.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include <gmock/gmock.h>

#include "core/error.h"
#include "io/atomic_file.h"
#include "train/checkpoint.h"
#include "train/checkpoint_manifest.h"
#include "train/mpi/memory_testing.h"
#include "train/resume_point.h"

namespace tessel::train {
namespace {

namespace fs = std::filesystem;

// A complete-looking step_<N> (latest_checkpoint only looks for metadata.json).
void make_step(const fs::path& dir, int64_t step) {
  const fs::path step_dir = checkpoint_step_dir(dir, step);
  fs::create_directories(step_dir);
  std::ofstream(step_dir / "metadata.json") << "{}";
}

class ResumePoint : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::shared_dir("resume_point");
    rank_ = dist::world()->rank();
    own_ = root_ / ("rank_" + std::to_string(rank_));
    fs::remove_all(own_);
    fs::create_directories(own_);
  }
  void TearDown() override {
    dist::world()->barrier();
    if (rank_ == 0) fs::remove_all(root_);
  }
  fs::path root_;
  fs::path own_;
  int rank_ = 0;
};

TEST_F(ResumePoint, EveryRankResumesRankZerosStep) {
  // Rank 0 sees steps 3 and 5; the others see newer or no steps of their own.
  if (rank_ == 0) {
    make_step(own_, 3);
    make_step(own_, 5);
  } else if (rank_ % 2 == 1) {
    make_step(own_, 5);
    make_step(own_, 9 + rank_);
  }
  const auto chosen = agreed_latest_checkpoint(own_, *dist::world());
  ASSERT_TRUE(chosen.has_value()) << "rank " << rank_;
  EXPECT_EQ(*chosen, checkpoint_step_dir(own_, 5)) << "rank " << rank_;
}

TEST_F(ResumePoint, NoneOnRankZeroMeansAFreshStartEverywhere) {
  if (rank_ != 0) make_step(own_, 7);
  EXPECT_FALSE(agreed_latest_checkpoint(own_, *dist::world()).has_value()) << "rank " << rank_;
}

TEST_F(ResumePoint, DamagedFileIsReportedOnEveryRank) {
  // A step of 7 files with their manifest, made by rank 0; each rank checks
  // only some of them, and file 5 (another rank's share at world > 1) is cut.
  const fs::path step_dir = root_ / "shared" / "step_1";
  if (rank_ == 0) {
    fs::create_directories(step_dir);
    CheckpointManifest files;
    for (int i = 0; i < 7; ++i) {
      const std::string name = "file_" + std::to_string(i);
      files[name] = io::write_file_atomically(step_dir / name, std::string(1000 + i, 'a' + i));
    }
    io::write_file_atomically(step_dir / "metadata.json",
                              "{\"files\": " + manifest_to_json(files) + "}");
  }
  dist::world()->barrier();
  EXPECT_NO_THROW(verify_checkpoint(step_dir, *dist::world()));
  dist::world()->barrier();
  if (rank_ == 0) fs::resize_file(step_dir / "file_5", 10);
  dist::world()->barrier();
  try {
    verify_checkpoint(step_dir, *dist::world());
    ADD_FAILURE() << "rank " << rank_ << " did not see the damage";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr((step_dir / "file_5").string() +
                                               " holds 10 bytes but the save wrote 1005"))
        << "rank " << rank_;
  }
}

}  // namespace
}  // namespace tessel::train
