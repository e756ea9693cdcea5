// Hugging Face checkpoint directories: single-file and sharded round trips,
// the index file's content, stale-file cleanup, and errors for incomplete or
// inconsistent directories.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/hf_checkpoint.h"
#include "io/hf_checkpoint_writer.h"
#include "io/safetensors_writer.h"
#include "temp_dir.h"

namespace tessel::io {
namespace {

using testing::expect_error_mentions;
using testing::TempDir;

const std::string kConfig = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8})";

// Five tensors of 64, 256, 64, 512 and 8 bytes, in model order.
NamedTensors small_model() {
  at::manual_seed(3);
  return {
      {"model.embed_tokens.weight", at::randn({4, 8}).to(at::kBFloat16)},  // 64 B
      {"model.layers.0.mlp.up_proj.weight", at::randn({8, 8})},            // 256 B
      {"model.layers.0.input_layernorm.weight", at::randn({16})},          // 64 B
      {"model.layers.0.mlp.down_proj.weight", at::randn({8, 16})},         // 512 B
      {"model.norm.weight", at::randn({4}).to(at::kHalf)},                 // 8 B
  };
}

void expect_same(const NamedTensors& expected, const HfCheckpoint& ckpt) {
  EXPECT_EQ(ckpt.names().size(), expected.size());
  for (const auto& [name, tensor] : expected) {
    const auto loaded = ckpt.load(name);
    ASSERT_EQ(loaded.scalar_type(), tensor.scalar_type()) << name;
    EXPECT_TRUE(at::equal(loaded, tensor)) << name;
  }
}

std::string read_text(const std::filesystem::path& p) { return testing::read_bytes(p); }

TEST(HfCheckpoint, SingleFileRoundTrip) {
  TempDir dir;
  const auto tensors = small_model();
  save_hf_checkpoint(dir.path(), tensors, kConfig);
  EXPECT_TRUE(std::filesystem::exists(dir / "model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors.index.json"));
  EXPECT_EQ(read_text(dir / "config.json"), kConfig);

  const auto ckpt = HfCheckpoint::open(dir.path());
  EXPECT_FALSE(ckpt.sharded());
  EXPECT_EQ(ckpt.config_path(), dir / "config.json");
  expect_same(tensors, ckpt);
  EXPECT_EQ(ckpt.files().at(0).metadata().at("format"), "pt");
  const auto names = ckpt.names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
}

TEST(HfCheckpoint, ShardedRoundTripAndIndexContent) {
  TempDir dir;
  const auto tensors = small_model();
  // Byte sizes in order: 64, 256, 64, 512, 8. With a 400-byte budget:
  // shard 1 = {embed, up_proj, layernorm} (384), shard 2 = {down_proj} (512:
  // an oversized tensor gets a shard of its own), shard 3 = {norm}
  // (512 + 8 > 400).
  save_hf_checkpoint(dir.path(), tensors, kConfig, 400);
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors"));
  for (const char* shard : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                            "model-00003-of-00003.safetensors"}) {
    EXPECT_TRUE(std::filesystem::exists(dir / shard)) << shard;
  }

  const auto index = nlohmann::json::parse(read_text(dir / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), 64u + 256 + 64 + 512 + 8);
  const std::map<std::string, std::string> expected_map{
      {"model.embed_tokens.weight", "model-00001-of-00003.safetensors"},
      {"model.layers.0.mlp.up_proj.weight", "model-00001-of-00003.safetensors"},
      {"model.layers.0.input_layernorm.weight", "model-00001-of-00003.safetensors"},
      {"model.layers.0.mlp.down_proj.weight", "model-00002-of-00003.safetensors"},
      {"model.norm.weight", "model-00003-of-00003.safetensors"},
  };
  EXPECT_EQ(index["weight_map"].get<decltype(expected_map)>(), expected_map);

  const auto ckpt = HfCheckpoint::open(dir.path());
  EXPECT_TRUE(ckpt.sharded());
  EXPECT_EQ(ckpt.files().size(), 3u);
  expect_same(tensors, ckpt);
  for (const auto& [name, file] : expected_map) {
    EXPECT_EQ(ckpt.file_of(name).path().filename(), file) << name;
  }
  // Slices and views work the same across shards.
  const auto& down = tensors[3].second;
  EXPECT_TRUE(at::equal(ckpt.load_slice("model.layers.0.mlp.down_proj.weight", 1, 4, 8),
                        down.narrow(1, 4, 8)));
  EXPECT_TRUE(at::equal(ckpt.load_slice("model.layers.0.mlp.down_proj.weight", 0, 2, 3),
                        down.narrow(0, 2, 3)));
  EXPECT_TRUE(at::equal(ckpt.view_slice("model.layers.0.mlp.up_proj.weight", 6, 2),
                        tensors[1].second.narrow(0, 6, 2)));
  EXPECT_EQ(ckpt.info("model.norm.weight").dtype, at::kHalf);
  const auto some = ckpt.load_many({"model.norm.weight", "model.embed_tokens.weight"});
  EXPECT_TRUE(at::equal(some.at("model.norm.weight"), tensors[4].second));
}

TEST(HfCheckpoint, ResavingInAnotherLayoutRemovesStaleFiles) {
  TempDir dir;
  const auto tensors = small_model();
  save_hf_checkpoint(dir.path(), tensors, kConfig, 400);
  // Sharded -> single: the index and shards would otherwise confuse other tools.
  save_hf_checkpoint(dir.path(), tensors, kConfig);
  std::set<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    files.insert(e.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"config.json", "model.safetensors"}));

  // Single -> sharded: model.safetensors would shadow the index.
  save_hf_checkpoint(dir.path(), tensors, kConfig, 600);  // 384 + 520 bytes
  files.clear();
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    files.insert(e.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"config.json", "model.safetensors.index.json",
                                          "model-00001-of-00002.safetensors",
                                          "model-00002-of-00002.safetensors"}));
  expect_same(tensors, HfCheckpoint::open(dir.path()));
}

TEST(HfCheckpoint, WriterRejectsBadInputBeforeWriting) {
  TempDir dir;
  auto tensors = small_model();
  tensors.push_back({"model.norm.weight", at::ones({4})});  // tied/shared: pass once
  expect_error_mentions([&] { save_hf_checkpoint(dir.path(), tensors, kConfig, 100); },
                        {"'model.norm.weight'", "twice"});
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  expect_error_mentions([&] { save_hf_checkpoint(dir.path(), small_model(), "{oops"); },
                        {"config.json", "not valid JSON"});
}

TEST(HfCheckpoint, DirectoryWithoutCheckpoint) {
  TempDir dir;
  expect_error_mentions([&] { HfCheckpoint::open(dir.path()); },
                        {dir.path().string(), "model.safetensors"});
  expect_error_mentions([&] { HfCheckpoint::open(dir / "nothing_here"); },
                        {"nothing_here", "not a directory"});
}

TEST(HfCheckpoint, MissingShardFile) {
  TempDir dir;
  save_hf_checkpoint(dir.path(), small_model(), kConfig, 400);
  std::filesystem::remove(dir / "model-00002-of-00003.safetensors");
  expect_error_mentions([&] { HfCheckpoint::open(dir.path()); },
                        {"model.safetensors.index.json", "model-00002-of-00003.safetensors",
                         "model.layers.0.mlp.down_proj.weight", "missing"});
}

TEST(HfCheckpoint, IndexNamesATensorItsShardLacks) {
  TempDir dir;
  save_safetensors(dir / "part-a.safetensors", {{"a", at::ones({2})}});
  save_safetensors(dir / "part-b.safetensors", {{"b", at::zeros({3})}});
  testing::write_bytes(dir / "model.safetensors.index.json",
                       R"({"metadata": {"total_size": 20}, "weight_map": )"
                       R"({"a": "part-a.safetensors", "ghost": "part-b.safetensors"}})");
  expect_error_mentions([&] { HfCheckpoint::open(dir.path()); },
                        {"model.safetensors.index.json", "'ghost'", "part-b.safetensors", "'b'"});
}

TEST(HfCheckpoint, HandWrittenIndexAndNameAbsentFromMap) {
  TempDir dir;
  save_safetensors(dir / "part-a.safetensors", {{"a", at::ones({2})}, {"unlisted", at::ones({1})}});
  save_safetensors(dir / "part-b.safetensors", {{"b", at::full({3}, 7.0)}});
  testing::write_bytes(dir / "model.safetensors.index.json",
                       R"({"weight_map": {"a": "part-a.safetensors", "b": "part-b.safetensors"}})");
  const auto ckpt = HfCheckpoint::open(dir.path());
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"a", "b"}));  // the map is the truth
  EXPECT_TRUE(at::equal(ckpt.load("b"), at::full({3}, 7.0)));
  expect_error_mentions([&] { ckpt.load("c"); },
                        {"model.safetensors.index.json", "'c'", "2 tensors"});
  expect_error_mentions([&] { ckpt.load("unlisted"); }, {"'unlisted'"});
}

TEST(HfCheckpoint, MalformedIndex) {
  TempDir dir;
  testing::write_bytes(dir / "model.safetensors.index.json", R"({"metadata": {}})");
  expect_error_mentions([&] { HfCheckpoint::open(dir.path()); },
                        {"model.safetensors.index.json", "weight_map"});
  testing::write_bytes(dir / "model.safetensors.index.json",
                       R"({"weight_map": {"a": "../elsewhere.safetensors"}})");
  expect_error_mentions([&] { HfCheckpoint::open(dir.path()); },
                        {"model.safetensors.index.json", "'a'", "not a file inside"});
  testing::write_bytes(dir / "model.safetensors.index.json", "not json");
  expect_error_mentions([&] { HfCheckpoint::open(dir.path()); },
                        {"model.safetensors.index.json", "not valid JSON"});
}

}  // namespace
}  // namespace tessel::io
