// save_safetensors then SafetensorsFile: every dtype comes back bit for bit,
// and the file has the layout HF readers require (8-byte-padded header, data
// contiguous and sized exactly, each tensor aligned to its element size).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>

#include "core/error.h"
#include "io/safetensors_file.h"
#include "io/safetensors_writer.h"
#include "temp_dir.h"

namespace tessel::io {
namespace {

using testing::TempDir;

void expect_bit_identical(const at::Tensor& expected, const at::Tensor& actual,
                          const std::string& what) {
  ASSERT_EQ(expected.scalar_type(), actual.scalar_type()) << what;
  ASSERT_EQ(expected.sizes(), actual.sizes()) << what;
  const auto e = expected.contiguous();
  const auto a = actual.contiguous();
  EXPECT_EQ(0, std::memcmp(e.data_ptr(), a.data_ptr(), e.numel() * e.element_size())) << what;
}

NamedTensors one_of_each_dtype() {
  at::manual_seed(7);
  // Odd sizes so that, written in caller order, wide types would be misaligned.
  return {
      {"bf16", at::randn({3, 5}).to(at::kBFloat16)},
      {"f16", at::randn({7}).to(at::kHalf)},
      {"f32", at::randn({2, 3, 4})},
      {"u8", at::randint(0, 256, {5}, at::kByte)},
      {"f64", at::randn({3}, at::kDouble)},
      {"i64", at::randint(-1000000, 1000000, {4}, at::kLong)},
      {"i32", at::randint(-1000, 1000, {3}, at::kInt)},
      {"i16", at::randint(-1000, 1000, {3}, at::kShort)},
      {"i8", at::randint(-128, 128, {3}, at::kChar)},
      {"bool", at::rand({9}) > 0.5},
  };
}

TEST(SafetensorsRoundTrip, EveryDtypeIsBitIdentical) {
  TempDir dir;
  const auto path = dir / "all.safetensors";
  const auto tensors = one_of_each_dtype();
  save_safetensors(path, tensors, {{"format", "pt"}, {"step", "12"}});

  const auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file.names().size(), tensors.size());
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("step"), "12");
  for (const auto& [name, tensor] : tensors) {
    expect_bit_identical(tensor, file.load(name), name + " (load)");
    expect_bit_identical(tensor, file.view(name), name + " (view)");
  }
}

TEST(SafetensorsRoundTrip, FileLayoutFollowsTheFormat) {
  TempDir dir;
  const auto path = dir / "layout.safetensors";
  const auto tensors = one_of_each_dtype();
  save_safetensors(path, tensors);

  // Parse the file with nothing but the format description.
  const std::string bytes = testing::read_bytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  ASSERT_LE(8 + n, bytes.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "the data buffer must start 8-byte aligned";
  const std::string header_text = bytes.substr(8, n);
  const auto header = nlohmann::json::parse(header_text);
  EXPECT_FALSE(header.contains("__metadata__")) << "no metadata was given";

  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, tensor] : tensors) {
    ASSERT_TRUE(header.contains(name)) << name;
    const auto& entry = header[name];
    EXPECT_EQ(entry["shape"].get<std::vector<int64_t>>(), tensor.sizes().vec()) << name;
    const auto begin = entry["data_offsets"][0].get<uint64_t>();
    const auto end = entry["data_offsets"][1].get<uint64_t>();
    EXPECT_EQ(end - begin, static_cast<uint64_t>(tensor.numel() * tensor.element_size())) << name;
    EXPECT_EQ((8 + n + begin) % static_cast<uint64_t>(tensor.element_size()), 0u)
        << name << " is not aligned to its element size";
    // The raw bytes at the offsets are the tensor's bytes.
    EXPECT_EQ(
        0, std::memcmp(bytes.data() + 8 + n + begin, tensor.contiguous().data_ptr(), end - begin))
        << name;
    ranges.emplace_back(begin, end);
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t cursor = 0;
  for (const auto& [begin, end] : ranges) {
    EXPECT_EQ(begin, cursor) << "HF requires the data buffer without gaps or overlaps";
    cursor = end;
  }
  EXPECT_EQ(8 + n + cursor, bytes.size()) << "no trailing bytes after the data";
  const auto last = header_text.find_last_not_of(' ');
  EXPECT_EQ(header_text[last], '}') << "the header is padded with spaces only";
}

TEST(SafetensorsRoundTrip, DtypeStringsAreTheFormatNames) {
  TempDir dir;
  const auto path = dir / "names.safetensors";
  save_safetensors(path, one_of_each_dtype());
  const std::string bytes = testing::read_bytes(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  const std::map<std::string, std::string> expected{
      {"bf16", "BF16"}, {"f16", "F16"}, {"f32", "F32"}, {"f64", "F64"}, {"i64", "I64"},
      {"i32", "I32"},   {"i16", "I16"}, {"i8", "I8"},   {"u8", "U8"},   {"bool", "BOOL"}};
  for (const auto& [name, dtype] : expected) EXPECT_EQ(header[name]["dtype"], dtype) << name;
}

TEST(SafetensorsRoundTrip, NonContiguousScalarAndEmptyTensors) {
  TempDir dir;
  const auto path = dir / "shapes.safetensors";
  const auto base = at::arange(12, at::kFloat).reshape({3, 4});
  const NamedTensors tensors{
      {"transposed", base.t()},                         // strides (1, 4)
      {"every_other", base.slice(1, 0, 4, 2)},          // a strided column view
      {"scalar", at::scalar_tensor(3.25, at::kFloat)},  // shape []
      {"empty", at::empty({0, 3}, at::kBFloat16)},
  };
  save_safetensors(path, tensors);
  const auto file = SafetensorsFile::open(path);
  for (const auto& [name, tensor] : tensors) {
    expect_bit_identical(tensor, file.load(name), name);
    expect_bit_identical(tensor, file.view(name), name + " (view)");
  }
  EXPECT_EQ(file.load("transposed")[1][2].item<float>(), 9.0f);  // base[2][1]
  EXPECT_EQ(file.load("scalar").dim(), 0);
}

TEST(SafetensorsRoundTrip, OverwritesAtomicallyAndLeavesNoTemporaryFiles) {
  TempDir dir;
  const auto path = dir / "model.safetensors";
  save_safetensors(path, {{"a", at::ones({4})}});
  // A reader of the old file keeps a consistent view while it is replaced.
  const auto old_file = SafetensorsFile::open(path);
  save_safetensors(path, {{"a", at::full({4}, 2.0)}, {"b", at::zeros({2})}});

  EXPECT_TRUE(at::equal(old_file.load("a"), at::ones({4})));
  const auto new_file = SafetensorsFile::open(path);
  EXPECT_TRUE(at::equal(new_file.load("a"), at::full({4}, 2.0)));
  EXPECT_TRUE(new_file.contains("b"));
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "model.safetensors");
  }
  EXPECT_EQ(entries, 1);
}

TEST(SafetensorsRoundTrip, LargeTensorCopiedInPieces) {
  // 24 MiB: several copy pieces, so a piece boundary bug would show.
  TempDir dir;
  const auto path = dir / "large.safetensors";
  const auto big = at::arange(6 * 1024 * 1024, at::kFloat).reshape({3 * 1024, 2048});
  save_safetensors(path, {{"big", big}});
  const auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(at::equal(file.load("big"), big));
  EXPECT_TRUE(at::equal(file.load_slice("big", 1, 1000, 1000), big.narrow(1, 1000, 1000)));
  EXPECT_TRUE(at::equal(file.load_slice("big", 0, 1000, 2000), big.narrow(0, 1000, 2000)));
}

TEST(SafetensorsWriter, RejectsBadNamesWithTheFileAndTensor) {
  TempDir dir;
  const auto path = dir / "bad.safetensors";
  testing::expect_error_mentions(
      [&] {
        save_safetensors(path, {{"w", at::ones({1})}, {"w", at::ones({2})}});
      },
      {path.string(), "'w'", "twice"});
  testing::expect_error_mentions(
      [&] {
        save_safetensors(path, {{"__metadata__", at::ones({1})}});
      },
      {path.string(), "reserved"});
  testing::expect_error_mentions(
      [&] {
        save_safetensors(path, {{"u", at::Tensor()}});
      },
      {path.string(), "'u'", "undefined"});
  testing::expect_error_mentions(
      [&] {
        save_safetensors(path, {{"c", at::ones({2}, at::kComplexFloat)}});
      },
      {path.string(), "'c'"});
  EXPECT_FALSE(std::filesystem::exists(path)) << "a failed save writes nothing";
}

}  // namespace
}  // namespace tessel::io
