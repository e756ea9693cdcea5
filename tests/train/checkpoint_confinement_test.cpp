// A checkpoint names only files inside its step directory: a "files" entry
// that climbs out with '..', an absolute one, one with a NUL byte, and a file
// of the step that is a link leading out are each refused with the entry
// named, by the check before a resume, by `tessel convert` and by the loader
// itself, and no file outside is opened (seen by the kernel,
// test_support::OpenWatch). Every bait outside is a byte-exact copy of a file
// of the step, listed with its true size and hash, so a reader that followed
// the name would load without a word: each test fails unless the name is
// refused. Links that stay inside the step still load.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/file_digest.h"
#include "io/xxhash64.h"
#include "support/open_watch.h"
#include "train/checkpoint.h"
#include "train/hf_export.h"
#include "train/checkpoint_fixture.h"
#include "train/checkpoint_manifest.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::quiet;
using testing::world_mesh;

class CheckpointConfinement : public testing::CheckpointFixture {
 protected:
  void SetUp() override {
    CheckpointFixture::SetUp();
    train(make_config(saving({"sft.max_num_steps=2"})), world_mesh(), quiet());
    ASSERT_TRUE(fs::is_regular_file(step() / "metadata.json"));
    fs::create_directories(outside());
    for (const char* name : {"config.yaml", "rank_0.safetensors", "metadata.json"}) {
      fs::copy_file(step() / name, outside() / name);
    }
  }

  fs::path step() const { return CheckpointFixture::step(2); }
  fs::path outside() const { return dir_ / "outside"; }
  fs::path bait() const { return outside() / "config.yaml"; }

  // Adds `name` to metadata.json's "files" with the bait's true size and hash.
  void list_in_files(const std::string& name) const {
    nlohmann::json meta;
    std::ifstream(step() / "metadata.json") >> meta;
    const io::FileDigest d = io::digest_file(bait());
    meta["files"][name] = {{"bytes", d.bytes}, {"xxh64", io::hash_hex(d.xxh64)}};
    std::ofstream(step() / "metadata.json") << meta.dump(2);
  }

  // The step's `name` becomes a link to `target`.
  void make_link(const std::string& name, const fs::path& target) const {
    fs::remove(step() / name);
    fs::create_symlink(target, step() / name);
  }

  // Each reader refuses the checkpoint with a UsageError holding every
  // needle, and none opens a file of outside().
  void expect_refused(const std::vector<std::pair<std::string, std::function<void()>>>& readers,
                      const std::vector<std::string>& needles) {
    test_support::OpenWatch watch(outside());
    for (const auto& [what, read] : readers) {
      try {
        read();
        ADD_FAILURE() << what << " read the checkpoint";
      } catch (const UsageError& e) {
        for (const auto& needle : needles) EXPECT_THAT(e.what(), HasSubstr(needle)) << what;
      }
    }
    EXPECT_THAT(watch.touched(), IsEmpty()) << "a file outside the checkpoint was opened";
    // The watch sees an open of the bait, so the line above could fail.
    std::ifstream(bait()).get();
    EXPECT_THAT(watch.touched(), Contains("config.yaml"));
  }

  // What reads a checkpoint: the check before a resume (through train, as a
  // run resumes from the latest step), `tessel convert`, and the check alone.
  std::vector<std::pair<std::string, std::function<void()>>> every_reader() {
    return {{"resume",
             [&] { train(make_config(saving({"sft.max_num_steps=4"})), world_mesh(), quiet()); }},
            {"convert", [&] { export_checkpoint(step(), dir_ / "hf", {}); }},
            {"verify", [&] { verify_checkpoint(step()); }}};
  }

  std::string metadata_names(const std::string& quoted) const {
    return (step() / "metadata.json").string() + ": \"files\" names " + quoted;
  }
};

TEST_F(CheckpointConfinement, EntryClimbingOutWithDotDotIsRefused) {
  list_in_files("../../outside/config.yaml");
  expect_refused(every_reader(), {metadata_names("\"../../outside/config.yaml\""),
                                  "not a file name inside the step directory",
                                  "climbs out of the directory with '..'"});
}

TEST_F(CheckpointConfinement, AbsoluteEntryIsRefused) {
  list_in_files(bait().string());
  expect_refused(every_reader(),
                 {metadata_names("\"" + bait().string() + "\""), "it is an absolute path"});
}

TEST_F(CheckpointConfinement, EntryWithANulByteIsRefused) {
  // A reader passing the name to the system would stop at the NUL and open
  // the bait, which matches the listed size and hash.
  list_in_files(std::string("../../outside/config.yaml") + '\0' + ".txt");
  expect_refused(every_reader(), {metadata_names("\"../../outside/config.yaml\\u0000.txt\""),
                                  "it contains a NUL byte"});
}

TEST_F(CheckpointConfinement, ListedFileThatLinksOutIsRefused) {
  // config.yaml -> hop -> ../../outside/config.yaml: relative links, one
  // inside, the next out.
  fs::create_symlink("../../outside/config.yaml", step() / "hop");
  make_link("config.yaml", "hop");
  expect_refused(every_reader(), {metadata_names("\"config.yaml\""),
                                  "it is a symbolic link to " + fs::canonical(bait()).string() +
                                      ", outside " + fs::canonical(step()).string()});
}

TEST_F(CheckpointConfinement, RankFileOrMetadataThatLinksOutIsRefused) {
  // The loader checks the files it opens itself, with or without the check
  // of the list before it.
  make_link("rank_0.safetensors", outside() / "rank_0.safetensors");
  auto readers = every_reader();
  readers.emplace_back("load", [&] { load_full_tensors(step()); });
  expect_refused(
      readers,
      {"names \"rank_0.safetensors\", which is not a file inside " + step().string(),
       "it is a symbolic link to " + fs::canonical(outside() / "rank_0.safetensors").string()});

  fs::remove(step() / "rank_0.safetensors");
  fs::copy_file(outside() / "rank_0.safetensors", step() / "rank_0.safetensors");
  make_link("metadata.json", outside() / "metadata.json");
  expect_refused(
      readers,
      {"checkpoint " + step().string() + " names \"metadata.json\", which is not a file inside",
       "it is a symbolic link to " + fs::canonical(outside() / "metadata.json").string()});
}

TEST_F(CheckpointConfinement, LinksThatStayInsideStillLoad) {
  fs::rename(step() / "config.yaml", step() / "config.yaml.kept");
  make_link("config.yaml", "config.yaml.kept");
  fs::rename(step() / "rank_0.safetensors", step() / "kept.safetensors");
  make_link("rank_0.safetensors", fs::absolute(step() / "kept.safetensors"));
  EXPECT_NO_THROW(verify_checkpoint(step()));
  EXPECT_NO_THROW(export_checkpoint(step(), dir_ / "hf", {}));
  EXPECT_TRUE(fs::is_regular_file(dir_ / "hf" / "model.safetensors"));
  const TrainResult resumed =
      train(make_config(saving({"sft.max_num_steps=4"})), world_mesh(), quiet());
  ASSERT_EQ(resumed.steps.size(), 2u);
  EXPECT_EQ(resumed.steps.front().step, 3);
}

}  // namespace
}  // namespace tessel::train
