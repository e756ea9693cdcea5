// SafetensorsFile against files built by hand from the format description
// (not by tessel's writer): values, dtypes, metadata, slices along every
// dimension, and zero-copy views.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "io/safetensors_file.h"
#include "raw_safetensors.h"
#include "temp_dir.h"

namespace tessel::io {
namespace {

using testing::TempDir;

// A [4, 5, 6] F32 tensor "cube" with value i*100 + j*10 + k, then a [2] BF16
// tensor "pair" = {1.0, -2.0} and a [3] F16 tensor "halves" = {1.0, 0.5, -0.25}.
std::filesystem::path write_cube_file(const TempDir& dir) {
  std::vector<float> cube;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 6; ++k) cube.push_back(static_cast<float>(i * 100 + j * 10 + k));
  const std::string data = testing::float_bytes(cube) + testing::u16_bytes({0x3F80, 0xC000}) +
                           testing::u16_bytes({0x3C00, 0x3800, 0xB400});
  const std::string header = R"({"__metadata__":{"format":"pt","note":"hand made"},)"
                             R"("cube":{"dtype":"F32","shape":[4,5,6],"data_offsets":[0,480]},)"
                             R"("pair":{"dtype":"BF16","shape":[2],"data_offsets":[480,484]},)"
                             R"("halves":{"dtype":"F16","shape":[3],"data_offsets":[484,490]}})";
  const auto path = dir / "hand.safetensors";
  testing::write_bytes(path, testing::safetensors_bytes(header, data));
  return path;
}

float cube_value(int64_t i, int64_t j, int64_t k) {
  return static_cast<float>(i * 100 + j * 10 + k);
}

TEST(SafetensorsReader, ReadsHandBuiltFile) {
  TempDir dir;
  const auto file = SafetensorsFile::open(write_cube_file(dir));
  EXPECT_EQ(file.names(), (std::vector<std::string>{"cube", "pair", "halves"}));  // data order
  EXPECT_EQ(file.metadata().at("note"), "hand made");
  const auto& info = file.info("cube");
  EXPECT_EQ(info.dtype, at::kFloat);
  EXPECT_EQ(info.shape, (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(info.numel(), 120);
  EXPECT_EQ(info.nbytes(), 480u);

  const auto cube = file.load("cube");
  ASSERT_EQ(cube.sizes(), (std::vector<int64_t>{4, 5, 6}));
  auto a = cube.accessor<float, 3>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 6; ++k) ASSERT_EQ(a[i][j][k], cube_value(i, j, k));

  const auto pair = file.load("pair");
  EXPECT_EQ(pair.scalar_type(), at::kBFloat16);
  EXPECT_EQ(pair[0].item<float>(), 1.0f);
  EXPECT_EQ(pair[1].item<float>(), -2.0f);
  const auto halves = file.load("halves");
  EXPECT_EQ(halves.scalar_type(), at::kHalf);
  EXPECT_EQ(halves[0].item<float>(), 1.0f);
  EXPECT_EQ(halves[1].item<float>(), 0.5f);
  EXPECT_EQ(halves[2].item<float>(), -0.25f);

  const auto some = file.load_many({"pair", "halves"});
  EXPECT_EQ(some.size(), 2u);
  EXPECT_EQ(some.at("pair")[1].item<float>(), -2.0f);
}

TEST(SafetensorsReader, SlicesAlongEveryDimension) {
  TempDir dir;
  const auto file = SafetensorsFile::open(write_cube_file(dir));
  struct Case {
    int64_t dim, start, length;
  };
  for (const Case c : {Case{0, 1, 2}, Case{0, 0, 4}, Case{0, 3, 1}, Case{1, 1, 3}, Case{1, 4, 1},
                       Case{2, 2, 3}, Case{-1, 0, 6}, Case{-2, 2, 2}, Case{1, 5, 0}}) {
    const auto slice = file.load_slice("cube", c.dim, c.start, c.length);
    const int64_t dim = c.dim < 0 ? c.dim + 3 : c.dim;
    std::vector<int64_t> shape{4, 5, 6};
    shape[dim] = c.length;
    ASSERT_EQ(slice.sizes(), shape) << "dim " << c.dim;
    ASSERT_TRUE(slice.is_contiguous());
    auto a = slice.accessor<float, 3>();
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < shape[1]; ++j)
        for (int64_t k = 0; k < shape[2]; ++k) {
          int64_t idx[3] = {i, j, k};
          idx[dim] += c.start;
          ASSERT_EQ(a[i][j][k], cube_value(idx[0], idx[1], idx[2]))
              << "dim " << c.dim << " start " << c.start << " at " << i << "," << j << "," << k;
        }
  }
  // Slices of a 1-d 16-bit tensor.
  EXPECT_EQ(file.load_slice("halves", 0, 1, 2)[1].item<float>(), -0.25f);
}

TEST(SafetensorsReader, LoadsEveryKindOfBox) {
  // Boxes partial in any set of dims (one contiguous run, strided runs,
  // walks over outer dims), empty ones, and whole tensors; values checked
  // against the formula the file was written from.
  TempDir dir;
  const auto file = SafetensorsFile::open(write_cube_file(dir));
  struct Case {
    std::vector<int64_t> offset, shape;
  };
  const std::vector<Case> cases = {{{0, 0, 0}, {4, 5, 6}}, {{1, 0, 0}, {2, 5, 6}}, {{1, 2, 0}, {1, 3, 6}},
                                   {{0, 0, 2}, {4, 5, 3}}, {{1, 1, 1}, {3, 4, 5}}, {{3, 4, 5}, {1, 1, 1}},
                                   {{0, 2, 0}, {4, 1, 6}}, {{2, 0, 0}, {0, 5, 6}}};
  for (const auto& c : cases) {
    const at::Tensor box = file.load_box("cube", c.offset, c.shape);
    ASSERT_EQ(box.sizes().vec(), c.shape);
    auto a = box.accessor<float, 3>();
    for (int64_t i = 0; i < c.shape[0]; ++i)
      for (int64_t j = 0; j < c.shape[1]; ++j)
        for (int64_t k = 0; k < c.shape[2]; ++k)
          ASSERT_EQ(a[i][j][k], cube_value(c.offset[0] + i, c.offset[1] + j, c.offset[2] + k))
              << "box at " << c.offset[0] << "," << c.offset[1] << "," << c.offset[2];
  }
  // Into other dtypes and strides (the staging path): a float64 tensor, and
  // a transposed view of one.
  for (const auto& c : cases) {
    const at::Tensor want = file.load_box("cube", c.offset, c.shape).to(at::kDouble);
    at::Tensor f64 = at::empty(c.shape, at::kDouble);
    file.read_box_into("cube", c.offset, f64);
    EXPECT_TRUE(f64.equal(want));
    at::Tensor backing = at::zeros({c.shape[2], c.shape[1], c.shape[0]}, at::kFloat);
    file.read_box_into("cube", c.offset, backing.permute({2, 1, 0}));
    EXPECT_TRUE(backing.permute({2, 1, 0}).to(at::kDouble).equal(want));
  }
  EXPECT_EQ(file.load_box("halves", {1}, {2})[1].item<float>(), -0.25f);
  at::Tensor halves = at::empty({3}, at::kFloat);
  file.read_box_into("halves", {0}, halves);
  EXPECT_EQ(halves[2].item<float>(), -0.25f);
  EXPECT_THROW(file.load_box("cube", {3, 0, 0}, {2, 5, 6}), Error);
  EXPECT_THROW(file.load_box("cube", {0, 0}, {4, 5}), Error);
}

TEST(SafetensorsReader, ViewsAreCopyOnWrite) {
  TempDir dir;
  const auto path = write_cube_file(dir);
  const std::string before = testing::read_bytes(path);
  at::Tensor view;
  {
    const auto file = SafetensorsFile::open(path);
    view = file.view("cube");
    auto other = file.view_slice("cube", 1, 2);
    EXPECT_EQ(other.sizes(), (std::vector<int64_t>{2, 5, 6}));
    EXPECT_EQ(other[0][0][0].item<float>(), cube_value(1, 0, 0));

    view.mul_(2);  // must touch neither the file, nor other views, nor loads
    EXPECT_EQ(other[0][0][0].item<float>(), cube_value(1, 0, 0));
    EXPECT_EQ(file.load("cube")[1][2][3].item<float>(), cube_value(1, 2, 3));
  }
  // The view outlives the SafetensorsFile it came from.
  EXPECT_EQ(view[3][4][5].item<float>(), 2 * cube_value(3, 4, 5));
  EXPECT_EQ(testing::read_bytes(path), before);
}

TEST(SafetensorsReader, MisalignedTensorIsCopiedNotViewed) {
  // A 3-byte U8 tensor first puts the F32 tensor at an odd offset; HF-style
  // writers avoid this, but it is a valid file.
  TempDir dir;
  std::string header = R"({"b":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
                       R"("f":{"dtype":"F32","shape":[2],"data_offsets":[3,11]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const auto path = dir / "odd.safetensors";
  testing::write_bytes(
      path, testing::safetensors_bytes(
                header, std::string("\x01\x02\x03", 3) + testing::float_bytes({1.5f, -7.0f})));
  const auto file = SafetensorsFile::open(path);
  const auto f = file.view("f");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f.data_ptr()) % 4, 0u);
  EXPECT_EQ(f[0].item<float>(), 1.5f);
  EXPECT_EQ(f[1].item<float>(), -7.0f);
  EXPECT_EQ(file.view("b")[2].item<uint8_t>(), 3);
}

TEST(SafetensorsReader, AcceptsGapsBetweenTensors) {
  // HF writers leave no gaps, but the bounds are all a reader needs.
  TempDir dir;
  const std::string header = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  const auto path = dir / "gap.safetensors";
  testing::write_bytes(
      path, testing::safetensors_bytes(header, testing::float_bytes({9.0f, 42.0f, 11.0f})));
  EXPECT_EQ(SafetensorsFile::open(path).load("x")[0].item<float>(), 42.0f);
}

}  // namespace
}  // namespace tessel::io
