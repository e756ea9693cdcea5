// Malformed safetensors files and bad requests fail at open (or at the
// request) with a tessel::Error naming the file, and the tensor where there is
// one — never a crash or garbage values.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "io/safetensors_file.h"
#include "raw_safetensors.h"
#include "temp_dir.h"

namespace tessel::io {
namespace {

using testing::expect_error_mentions;
using testing::TempDir;

// A valid [2, 3] F32 tensor "weight" (values 0..5) to corrupt or query.
const std::string kWeightEntry = R"("weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";
std::string weight_data() { return testing::float_bytes({0, 1, 2, 3, 4, 5}); }

std::filesystem::path write(const TempDir& dir, const std::string& name, const std::string& bytes) {
  const auto path = dir / name;
  testing::write_bytes(path, bytes);
  return path;
}

TEST(SafetensorsErrors, MissingFile) {
  TempDir dir;
  const auto path = dir / "absent.safetensors";
  expect_error_mentions([&] { SafetensorsFile::open(path); }, {path.string(), "cannot open"});
}

TEST(SafetensorsErrors, ShorterThanTheHeaderLength) {
  TempDir dir;
  for (const std::string& bytes : {std::string(), std::string("\x10\0\0\0\0", 5)}) {
    const auto path = write(dir, "short.safetensors", bytes);
    expect_error_mentions([&] { SafetensorsFile::open(path); },
                          {path.string(), std::to_string(bytes.size()) + " bytes", "too short"});
  }
}

TEST(SafetensorsErrors, HeaderLengthPastEndOfFile) {
  TempDir dir;
  const std::string header = "{" + kWeightEntry + "}";
  const auto path =
      write(dir, "cut.safetensors", testing::safetensors_bytes(header, "", header.size() + 100));
  expect_error_mentions([&] { SafetensorsFile::open(path); }, {path.string(), "past the end"});
}

TEST(SafetensorsErrors, AbsurdHeaderLength) {
  TempDir dir;
  const auto path =
      write(dir, "huge.safetensors", testing::safetensors_bytes("{}", "", uint64_t{1} << 40));
  expect_error_mentions([&] { SafetensorsFile::open(path); }, {path.string(), "limit"});
}

TEST(SafetensorsErrors, HeaderNotJson) {
  TempDir dir;
  const auto path = write(dir, "text.safetensors",
                          testing::safetensors_bytes("{\"weight\": [1, 2", weight_data()));
  expect_error_mentions([&] { SafetensorsFile::open(path); }, {path.string(), "not valid JSON"});
}

TEST(SafetensorsErrors, HeaderNotAnObject) {
  TempDir dir;
  const auto path = write(dir, "array.safetensors", testing::safetensors_bytes("[1, 2]", ""));
  expect_error_mentions([&] { SafetensorsFile::open(path); },
                        {path.string(), "expected an object"});
}

TEST(SafetensorsErrors, EntryMissingFields) {
  TempDir dir;
  const auto path = write(
      dir, "fields.safetensors",
      testing::safetensors_bytes(R"({"weight":{"dtype":"F32","shape":[2,3]}})", weight_data()));
  expect_error_mentions([&] { SafetensorsFile::open(path); },
                        {path.string(), "'weight'", "data_offsets"});
}

TEST(SafetensorsErrors, OffsetsOutOfRange) {
  TempDir dir;
  const auto path = write(
      dir, "range.safetensors",
      testing::safetensors_bytes(
          R"({"weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,400]}})", weight_data()));
  expect_error_mentions([&] { SafetensorsFile::open(path); },
                        {path.string(), "'weight'", "outside the 24-byte data buffer"});
  const auto reversed =
      write(dir, "reversed.safetensors",
            testing::safetensors_bytes(
                R"({"weight":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", weight_data()));
  expect_error_mentions([&] { SafetensorsFile::open(reversed); }, {reversed.string(), "'weight'"});
}

TEST(SafetensorsErrors, OffsetsInconsistentWithShape) {
  TempDir dir;
  const auto path = write(
      dir, "shape.safetensors",
      testing::safetensors_bytes(
          R"({"weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", weight_data()));
  expect_error_mentions([&] { SafetensorsFile::open(path); },
                        {path.string(), "'weight'", "span 20 bytes", "needs 24 bytes"});
  // A shape whose byte size overflows 64 bits must not wrap around to a match.
  const auto overflow = write(
      dir, "overflow.safetensors",
      testing::safetensors_bytes(
          R"({"weight":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})",
          ""));
  expect_error_mentions([&] { SafetensorsFile::open(overflow); }, {overflow.string(), "'weight'"});
  const auto negative = write(
      dir, "negative.safetensors",
      testing::safetensors_bytes(
          R"({"weight":{"dtype":"F32","shape":[-2,3],"data_offsets":[0,24]}})", weight_data()));
  expect_error_mentions([&] { SafetensorsFile::open(negative); },
                        {negative.string(), "'weight'", "non-negative"});
}

TEST(SafetensorsErrors, UnknownDtype) {
  TempDir dir;
  const auto path = write(
      dir, "dtype.safetensors",
      testing::safetensors_bytes(
          R"({"weight":{"dtype":"F12","shape":[2,3],"data_offsets":[0,24]}})", weight_data()));
  expect_error_mentions([&] { SafetensorsFile::open(path); },
                        {path.string(), "'weight'", "'F12'", "BF16"});
}

TEST(SafetensorsErrors, MissingTensorListsTheClosestNames) {
  TempDir dir;
  const auto path = write(
      dir, "ok.safetensors",
      testing::safetensors_bytes(
          "{" + kWeightEntry + R"(,"bias":{"dtype":"F32","shape":[0],"data_offsets":[24,24]}})",
          weight_data()));
  const auto file = SafetensorsFile::open(path);
  expect_error_mentions([&] { file.load("model.weight"); },
                        {path.string(), "'model.weight'", "'weight'", "2 tensors"});
  expect_error_mentions([&] { file.load_slice("wieght", 0, 0, 1); }, {path.string(), "'wieght'"});
  expect_error_mentions([&] { file.view("nope"); }, {path.string(), "'nope'"});
  EXPECT_FALSE(file.contains("model.weight"));
}

TEST(SafetensorsErrors, SliceOutOfRange) {
  TempDir dir;
  const auto path = write(dir, "ok.safetensors",
                          testing::safetensors_bytes("{" + kWeightEntry + "}", weight_data()));
  const auto file = SafetensorsFile::open(path);
  expect_error_mentions([&] { file.load_slice("weight", 1, 2, 2); },
                        {path.string(), "'weight'", "size 3 in dim 1", "[2, 4)"});
  expect_error_mentions([&] { file.load_slice("weight", 0, -1, 1); },
                        {path.string(), "'weight'", "out of range"});
  expect_error_mentions([&] { file.load_slice("weight", 2, 0, 1); },
                        {path.string(), "'weight'", "dim 2"});
  expect_error_mentions([&] { file.view_slice("weight", 1, 2); },
                        {path.string(), "'weight'", "out of range"});
  // The valid edge is accepted.
  EXPECT_EQ(file.load_slice("weight", 1, 2, 1)[1][0].item<float>(), 5.0f);
}

}  // namespace
}  // namespace tessel::io
