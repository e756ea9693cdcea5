// Hugging Face exports written piece by piece (io/hf_export_layout.h,
// io/hf_export_writer.h): boxes written in any order, from any dtype,
// produce byte for byte the files save_hf_checkpoint writes from whole
// tensors (the writer this project has loaded into transformers since its
// start), single-file and sharded; sizes given as text; and the staged
// directory that appears only when complete and refuses to replace files.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/byte_size.h"
#include "io/hf_checkpoint.h"
#include "io/hf_checkpoint_writer.h"
#include "io/hf_export_layout.h"
#include "io/hf_export_writer.h"
#include "io/staged_directory.h"
#include "temp_dir.h"

namespace tessel::io {
namespace {

namespace fs = std::filesystem;
using testing::read_bytes;
using testing::TempDir;

// A model's tensors in model order: 2-D weights, a 3-D one, a 1-D norm.
NamedTensors model_tensors() {
  at::manual_seed(11);
  return {{"model.embed_tokens.weight", at::randn({10, 6})},
          {"model.layers.0.self_attn.q_proj.weight", at::randn({6, 6})},
          {"model.layers.0.experts.weight", at::randn({3, 4, 5})},
          {"model.layers.0.input_layernorm.weight", at::randn({6})},
          {"lm_head.weight", at::randn({10, 6})}};
}

std::vector<ExportTensor> described(const NamedTensors& tensors) {
  std::vector<ExportTensor> out;
  for (const auto& [name, t] : tensors) out.push_back({name, t.sizes().vec()});
  return out;
}

// One box of a write: the tensor, its corner and its extent.
struct Box {
  std::string name;
  std::vector<int64_t> offset;
  std::vector<int64_t> shape;
};

// Every tensor cut into boxes as ranks hold them: row ranges (FSDP),
// column ranges (a row-parallel tp piece), a 3-D tensor cut along its middle
// dim, a 1-D tensor in two halves.
std::vector<Box> cut_into_boxes(const NamedTensors& tensors) {
  std::vector<Box> boxes;
  for (const auto& [name, t] : tensors) {
    const auto s = t.sizes().vec();
    if (s.size() == 1) {
      boxes.push_back({name, {0}, {s[0] / 2}});
      boxes.push_back({name, {s[0] / 2}, {s[0] - s[0] / 2}});
    } else if (s.size() == 3) {
      boxes.push_back({name, {0, 0, 0}, {s[0], 1, s[2]}});
      boxes.push_back({name, {0, 1, 0}, {s[0], s[1] - 1, s[2]}});
    } else if (name.find("q_proj") != std::string::npos) {
      boxes.push_back({name, {0, 0}, {s[0], 4}});
      boxes.push_back({name, {0, 4}, {s[0], s[1] - 4}});
    } else {
      boxes.push_back({name, {0, 0}, {3, s[1]}});
      boxes.push_back({name, {3, 0}, {s[0] - 3, s[1]}});
    }
  }
  return boxes;
}

at::Tensor box_of(const at::Tensor& t, const Box& b) {
  at::Tensor v = t;
  for (size_t d = 0; d < b.offset.size(); ++d) v = v.narrow(static_cast<int64_t>(d), b.offset[d], b.shape[d]);
  return v;
}

// Writes `tensors` box by box in a shuffled order, as two writers would.
void write_in_boxes(const fs::path& dir, const HfExportLayout& layout, const NamedTensors& tensors) {
  create_export_files(dir, layout);
  auto boxes = cut_into_boxes(tensors);
  std::shuffle(boxes.begin(), boxes.end(), std::mt19937(5));
  HfExportWriter first(dir, layout), second(dir, layout);
  std::map<std::string, at::Tensor> by_name(tensors.begin(), tensors.end());
  for (size_t i = 0; i < boxes.size(); ++i) {
    (i % 2 ? first : second).write_box(boxes[i].name, boxes[i].offset, box_of(by_name.at(boxes[i].name), boxes[i]));
  }
  first.finish();
  second.finish();
}

TEST(HfExport, BoxesWrittenInAnyOrderGiveTheBytesOfTheWholeTensorWriter) {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (const uint64_t max_shard : {uint64_t{1} << 30, uint64_t{300}}) {
      TempDir boxes, whole;
      const NamedTensors tensors = model_tensors();
      const HfExportLayout layout(described(tensors), dtype, max_shard);
      write_in_boxes(boxes.path(), layout, tensors);
      NamedTensors converted;
      for (const auto& [name, t] : tensors) converted.emplace_back(name, t.to(dtype));
      save_hf_checkpoint(whole.path(), converted, "", max_shard);
      const std::string what = fmt::format("{}, shards of {} B", c10::toString(dtype), max_shard);
      ASSERT_EQ(layout.sharded(), max_shard < 1000) << what;
      for (const ExportFile& f : layout.files()) {
        ASSERT_TRUE(fs::exists(whole / f.name)) << what << ": " << f.name;
        EXPECT_EQ(read_bytes(boxes / f.name), read_bytes(whole / f.name)) << what << ": " << f.name;
      }
      if (layout.sharded()) {
        EXPECT_EQ(layout.index_json(), read_bytes(whole / kHfSafetensorsIndexFile)) << what;
        write_file_atomically(boxes / kHfSafetensorsIndexFile, layout.index_json());
      }
      const auto ckpt = HfCheckpoint::open(boxes.path());
      for (const auto& [name, t] : converted) EXPECT_TRUE(at::equal(ckpt.load(name), t)) << what << ": " << name;
    }
  }
}

TEST(HfExport, BoxesLargerThanAPieceAreWrittenInPieces) {
  // 22 MB in float32: written through pieces of at most 16 MiB, converted on the way.
  TempDir boxes, whole;
  at::manual_seed(2);
  const NamedTensors tensors = {{"big", at::randn({1100, 5000})}, {"small", at::randn({7})}};
  const HfExportLayout layout(described(tensors), at::kBFloat16, uint64_t{1} << 30);
  create_export_files(boxes.path(), layout);
  HfExportWriter writer(boxes.path(), layout);
  writer.write_box("small", {0}, tensors[1].second);
  writer.write_box("big", {0, 0}, tensors[0].second);
  writer.finish();
  save_hf_checkpoint(whole.path(), {{"big", tensors[0].second.to(at::kBFloat16)}, {"small", tensors[1].second.to(at::kBFloat16)}},
                     "");
  EXPECT_EQ(read_bytes(boxes / "model.safetensors"), read_bytes(whole / "model.safetensors"));
}

TEST(HfExport, LayoutSplitsAsSavePretrained) {
  // 40 B, 40 B, 100 B (over the limit: alone), 8 B under a 64 B limit.
  const HfExportLayout layout({{"a", {10}}, {"b", {10}}, {"c", {25}}, {"d", {2}}}, at::kFloat, 64);
  ASSERT_EQ(layout.files().size(), 4u);
  EXPECT_EQ(layout.files()[0].name, "model-00001-of-00004.safetensors");
  EXPECT_EQ(layout.place("b").file, 1u);
  EXPECT_EQ(layout.place("c").file, 2u);
  EXPECT_EQ(layout.place("d").file, 3u);
  EXPECT_EQ(layout.total_bytes(), 188u);
  EXPECT_EQ(layout.place("a").offset, layout.files()[0].header.size());
  EXPECT_EQ(layout.files()[0].bytes, layout.files()[0].header.size() + 40);
  const HfExportLayout one({{"a", {10}}, {"b", {10}}}, at::kFloat, 80);
  ASSERT_EQ(one.files().size(), 1u);
  EXPECT_EQ(one.files()[0].name, "model.safetensors");
  EXPECT_EQ(one.index_json(), "");
  EXPECT_EQ(one.place("b").offset, one.place("a").offset + 40);
  EXPECT_THROW(HfExportLayout({{"a", {1}}, {"a", {2}}}, at::kFloat, 10), Error);
}

TEST(HfExport, BoxOutsideItsTensorIsRefused) {
  TempDir dir;
  const HfExportLayout layout({{"w", {4, 3}}}, at::kFloat, 1000);
  create_export_files(dir.path(), layout);
  HfExportWriter writer(dir.path(), layout);
  testing::expect_error_mentions([&] { writer.write_box("w", {3, 0}, at::zeros({2, 3})); },
                                 {"'w'", "[4, 3]", "outside"});
  testing::expect_error_mentions([&] { writer.write_box("v", {0}, at::zeros({1})); }, {"'v'", "not part"});
}

TEST(HfExport, ByteSizes) {
  EXPECT_EQ(parse_byte_size("5GB", "s"), 5'000'000'000u);
  EXPECT_EQ(parse_byte_size("500MB", "s"), 500'000'000u);
  EXPECT_EQ(parse_byte_size("2GiB", "s"), uint64_t{2} << 30);
  EXPECT_EQ(parse_byte_size("1.5 gb", "s"), 1'500'000'000u);
  EXPECT_EQ(parse_byte_size("10kib", "s"), 10240u);
  EXPECT_EQ(parse_byte_size("4096", "s"), 4096u);
  EXPECT_EQ(parse_byte_size("7B", "s"), 7u);
  for (const char* bad : {"", "five", "5XB", "0", "0.1B", "-3MB", "1..2GB", "GB", "99999999TB"}) {
    try {
      parse_byte_size(bad, "--max-shard-size");
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("--max-shard-size: '{}' is not a size", bad)), std::string::npos)
          << e.what();
    }
  }
}

TEST(HfExport, StagedDirectoryAppearsWholeAndNeverReplacesFiles) {
  TempDir dir;
  const fs::path out = dir / "export";
  const fs::path staging = begin_staging(out, "export");
  EXPECT_EQ(staging, dir / ".export.partial");
  write_file_atomically(staging / "config.json", "{}");
  EXPECT_FALSE(fs::exists(out));
  commit_staging(staging, out);
  EXPECT_TRUE(fs::exists(out / "config.json"));
  EXPECT_FALSE(fs::exists(staging));

  // An existing non-empty directory, or a file, is refused; an empty one is taken.
  EXPECT_THROW(begin_staging(out, "export"), UsageError);
  write_file_atomically(dir / "file", "x");
  EXPECT_THROW(check_new_directory(dir / "file", "export"), UsageError);
  fs::create_directories(dir / "empty");
  const fs::path again = begin_staging(dir / "empty", "export");
  write_file_atomically(again / "a", "1");
  commit_staging(again, dir / "empty");
  EXPECT_EQ(read_bytes(dir / "empty" / "a"), "1");
  // What a failed attempt left behind is cleared by the next one.
  fs::create_directories(dir / ".next.partial");
  write_file_atomically(dir / ".next.partial" / "stale", "x");
  const fs::path next = begin_staging(dir / "next", "export");
  EXPECT_TRUE(fs::is_empty(next));
  abandon_staging(next);
  EXPECT_FALSE(fs::exists(next));
}

}  // namespace
}  // namespace tessel::io
