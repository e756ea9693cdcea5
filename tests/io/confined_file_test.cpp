// File names from a checkpoint's content stay inside its directory
// (io/confined_file.h): the name rules, how names are shown, links, and the
// Hugging Face loader, whose index names its shards. Every refused shard
// exists outside, a valid safetensors file holding the tensor the index
// sends there, so a loader that followed the name would succeed; the kernel
// (test_support::OpenWatch) sees that nothing outside was opened.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/confined_file.h"
#include "io/hf_checkpoint.h"
#include "io/safetensors_writer.h"
#include "support/open_watch.h"
#include "temp_dir.h"

namespace tessel::io {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using testing::expect_error_mentions;
using ::testing::IsEmpty;
using testing::TempDir;

TEST(ConfinedFile, PlainFileNames) {
  for (const std::string name :
       {"rank_0.safetensors", "config.json", "a..b", "..hidden", "x.", " ", "日本.bin"}) {
    EXPECT_EQ(why_not_a_plain_file_name(name), "") << name;
  }
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"", "it is empty"},
      {std::string("a\0b", 3), "it contains a NUL byte"},
      {"/etc/hostname", "it is an absolute path"},
      {"//x", "it is an absolute path"},
      {"..", "'..' is a directory, not a file"},
      {".", "'.' is a directory, not a file"},
      {"../x", "it climbs out of the directory with '..'"},
      {"a/../../x", "it climbs out of the directory with '..'"},
      {"a/..", "it climbs out of the directory with '..'"},
      {"a/b", "it contains '/' (a file in another directory)"},
      {"a/", "it contains '/' (a file in another directory)"},
  };
  for (const auto& [name, why] : refused) EXPECT_EQ(why_not_a_plain_file_name(name), why) << name;
}

TEST(ConfinedFile, NamesAreShownAsJsonWritesThem) {
  EXPECT_EQ(quoted_file_name("a.bin"), "\"a.bin\"");
  EXPECT_EQ(quoted_file_name(std::string("a\0b\n\x7f", 5)), "\"a\\u0000b\\u000a\\u007f\"");
  EXPECT_EQ(quoted_file_name("say \"hi\"\\"), "\"say \\\"hi\\\"\\\\\"");
  EXPECT_EQ(quoted_file_name("日本"), "\"日本\"");
}

TEST(ConfinedFile, LinksMustLeadInside) {
  TempDir tmp;
  const fs::path dir = tmp / "ckpt", out = tmp / "outside";
  fs::create_directories(dir / "sub");
  fs::create_directories(out);
  tmp.write("ckpt/file", "x");
  tmp.write("ckpt/sub/deep", "x");
  tmp.write("outside/file", "x");
  fs::create_symlink("file", dir / "same");
  fs::create_symlink("sub/deep", dir / "down");
  fs::create_symlink(fs::absolute(dir / "file"), dir / "absolute_inside");
  fs::create_symlink("../outside/file", dir / "up");
  fs::create_symlink(out / "file", dir / "absolute_outside");
  fs::create_symlink("up", dir / "chain");
  fs::create_symlink("../outside/missing", dir / "dangling");
  fs::create_symlink("loop", dir / "loop");
  fs::create_symlink(".", dir / "self");
  for (const char* name : {"file", "same", "down", "absolute_inside", "not_there"}) {
    EXPECT_EQ(why_outside(dir, name, dir), "") << name;
  }
  const std::string target = fs::canonical(out / "file").string(),
                    inside = fs::canonical(dir).string();
  for (const char* name : {"up", "absolute_outside", "chain"}) {
    EXPECT_EQ(why_outside(dir, name, dir),
              "it is a symbolic link to " + target + ", outside " + inside)
        << name;
  }
  EXPECT_EQ(why_outside(dir, "dangling", dir), "it is a symbolic link to " +
                                                   fs::weakly_canonical(out).string() +
                                                   "/missing, outside " + inside);
  EXPECT_THAT(why_outside(dir, "loop", dir),
              ::testing::StartsWith("it is a symbolic link that cannot be followed"));
  EXPECT_EQ(why_outside(dir, "self", dir),
            "it is a symbolic link to the directory " + inside + " itself");
  // A wider root admits what leads into it.
  EXPECT_EQ(why_outside(dir, "up", tmp.path()), "");
  // The name rules come first: nothing is resolved for them.
  EXPECT_EQ(why_outside(dir, "../outside/file", tmp.path()),
            "it climbs out of the directory with '..'");

  EXPECT_EQ(confined_file(dir, "same", "test"), dir / "same");
  expect_error_mentions(
      [&] { confined_file(dir, "up", "the list of test"); },
      {"the list of test names \"up\", which is not a file inside " + dir.string(),
       "it is a symbolic link to " + target, "restore the checkpoint from a copy"});
}

class HfConfinement : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir());
    fs::create_directories(outside());
    save_safetensors(dir() / "part-a.safetensors", {{"a", at::ones({2})}});
    save_safetensors(outside() / "part-b.safetensors", {{"b", at::full({3}, 7.0)}});
  }
  fs::path dir() const { return tmp_ / "model"; }
  fs::path outside() const { return tmp_ / "outside"; }
  void index_sends_b_to(const std::string& shard) const {
    const nlohmann::json index = {{"weight_map", {{"a", "part-a.safetensors"}, {"b", shard}}}};
    testing::write_bytes(dir() / kHfSafetensorsIndexFile, index.dump());
  }
  // Opening refuses with every needle, and nothing outside is opened.
  void expect_refused(std::initializer_list<std::string> needles) const {
    test_support::OpenWatch watch(outside());
    expect_error_mentions([&] { HfCheckpoint::open(dir()); }, needles);
    EXPECT_THAT(watch.touched(), IsEmpty()) << "a file outside the model directory was opened";
    SafetensorsFile::open(outside() / "part-b.safetensors");  // the watch sees an open
    EXPECT_THAT(watch.touched(), Contains("part-b.safetensors"));
  }
  TempDir tmp_;
};

TEST_F(HfConfinement, IndexNamesOutsideTheDirectoryAreRefused) {
  const std::string where =
      (dir() / kHfSafetensorsIndexFile).string() + ": the weight_map entry of tensor 'b' names ";
  index_sends_b_to("../outside/part-b.safetensors");
  expect_refused(
      {where + "\"../outside/part-b.safetensors\", which is not a file inside " + dir().string(),
       "climbs out of the directory with '..'"});
  index_sends_b_to((outside() / "part-b.safetensors").string());
  expect_refused({where + "\"" + (outside() / "part-b.safetensors").string() + "\"",
                  "it is an absolute path"});
  index_sends_b_to(std::string("../outside/part-b.safetensors") + '\0' + ".x");
  expect_refused({where + "\"../outside/part-b.safetensors\\u0000.x\"", "it contains a NUL byte"});
}

TEST_F(HfConfinement, ShardsThatLinkOutAreRefused) {
  fs::create_symlink("../outside/part-b.safetensors", dir() / "part-b.safetensors");
  index_sends_b_to("part-b.safetensors");
  expect_refused(
      {"the weight_map entry of tensor 'b' names \"part-b.safetensors\", which is not a file "
       "inside",
       "it is a symbolic link to " + fs::canonical(outside() / "part-b.safetensors").string()});
  // The single-file form too.
  fs::remove(dir() / kHfSafetensorsIndexFile);
  fs::create_symlink("../outside/part-b.safetensors", dir() / kHfSafetensorsFile);
  expect_refused({"Hugging Face directory " + dir().string() + " names \"model.safetensors\"",
                  "it is a symbolic link to"});
}

TEST_F(HfConfinement, LinksInsideAndTheHubCacheLayoutLoad) {
  fs::copy_file(outside() / "part-b.safetensors", dir() / "b.data");
  fs::create_symlink("b.data", dir() / "part-b.safetensors");
  index_sends_b_to("part-b.safetensors");
  EXPECT_TRUE(at::equal(HfCheckpoint::open(dir()).load("b"), at::full({3}, 7.0)));

  // huggingface_hub's cache: <repo>/snapshots/<revision>/<file> -> ../../blobs/<hash>.
  const fs::path repo = tmp_ / "models--org--tiny";
  const fs::path snapshot = repo / "snapshots" / "0123abcd";
  fs::create_directories(repo / "blobs");
  fs::create_directories(snapshot);
  save_safetensors(repo / "blobs" / "9f86d081", {{"w", at::full({2}, 3.0)}});
  fs::create_symlink("../../blobs/9f86d081", snapshot / kHfSafetensorsFile);
  EXPECT_TRUE(at::equal(HfCheckpoint::open(snapshot).load("w"), at::full({2}, 3.0)));
  // Out of the repository is still out.
  fs::remove(snapshot / kHfSafetensorsFile);
  fs::create_symlink(outside() / "part-b.safetensors", snapshot / kHfSafetensorsFile);
  expect_error_mentions([&] { HfCheckpoint::open(snapshot); },
                        {"names \"model.safetensors\"", "outside " + fs::canonical(repo).string()});
}

}  // namespace
}  // namespace tessel::io
