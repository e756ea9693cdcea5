// BoxMap arithmetic: narrowing a map to local rows and intersecting the
// segments of two maps, checked by copying through them against tensors
// sliced directly.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "tensor/box_map.h"

namespace tessel::tensor {
namespace {

at::Tensor box(const at::Tensor& t, const std::vector<int64_t>& offset, const std::vector<int64_t>& shape) {
  at::Tensor v = t;
  for (size_t d = 0; d < shape.size(); ++d) v = v.narrow(static_cast<int64_t>(d), offset[d], shape[d]);
  return v;
}

// The local tensor a map describes, filled from `full`.
at::Tensor gather(const at::Tensor& full, const BoxMap& map, const std::vector<int64_t>& local_shape) {
  at::Tensor local = at::full(local_shape, -1.0);
  for (const auto& s : map) box(local, s.local_offset, s.shape).copy_(box(full, s.global_offset, s.shape));
  return local;
}

TEST(BoxMap, NarrowingRowsOfTwoSideBySideBlocks) {
  // A packed piece: rows 1-2 and 5-6 of an [8, 3] tensor, stacked as 4 local
  // rows; local rows [1, 3) cross from the first block into the second.
  const at::Tensor full = at::arange(24, at::kFloat).reshape({8, 3});
  const BoxMap piece = {{{1, 0}, {0, 0}, {2, 3}}, {{5, 0}, {2, 0}, {2, 3}}};
  EXPECT_TRUE(gather(full, piece, {4, 3}).equal(at::cat({full.narrow(0, 1, 2), full.narrow(0, 5, 2)})));
  const BoxMap rows = narrow_local_rows(piece, 1, 2);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(map_numel(rows), 6);
  EXPECT_TRUE(gather(full, rows, {2, 3}).equal(at::cat({full.narrow(0, 2, 1), full.narrow(0, 5, 1)})));
  EXPECT_TRUE(narrow_local_rows(piece, 4, 3).empty());
  EXPECT_EQ(map_numel(whole_tensor_map({8, 3})), 24);
}

TEST(BoxMap, OverlapsMapOneLocalTensorOntoAnother) {
  // dst holds columns [1, 4) of rows [2, 6); src holds rows [4, 8) whole,
  // stored from its local row 0. The overlap is rows [4, 6) x cols [1, 4).
  const at::Tensor full = at::arange(40, at::kFloat).reshape({8, 5});
  const BoxSegment dst{{2, 1}, {0, 0}, {4, 3}};
  const BoxSegment src{{4, 0}, {0, 0}, {4, 5}};
  const auto o = overlap(dst, src);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->global_offset, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(o->dst_offset, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(o->src_offset, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(o->shape, (std::vector<int64_t>{2, 3}));
  const at::Tensor src_local = full.narrow(0, 4, 4);
  at::Tensor dst_local = at::zeros({4, 3});
  box(dst_local, o->dst_offset, o->shape).copy_(box(src_local, o->src_offset, o->shape));
  EXPECT_TRUE(dst_local.narrow(0, 2, 2).equal(full.narrow(0, 4, 2).narrow(1, 1, 3)));
  EXPECT_FALSE(overlap(BoxSegment{{0, 0}, {0, 0}, {2, 5}}, src).has_value());
  EXPECT_FALSE(overlap(BoxSegment{{4, 0}, {0, 0}, {0, 5}}, src).has_value());  // empty box
}

}  // namespace
}  // namespace tessel::tensor
