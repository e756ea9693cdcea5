// tiled_causal_attention against causal_attention (the plain ATen
// composition, differentiated by autograd) over the whole row, forward and
// backward, in float64: query tiles that divide the row and that do not, one
// tile for the whole row, sliding windows shorter and longer than a tile,
// softcapping, packed documents with padding (-1), and all of them at once
// (short rows: backward takes the forward's kept probabilities), then a long
// row (backward computes them again). Then float32 inputs laid out as
// Attention passes them (transposed views).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>

#include "nn/attention.h"
#include "nn/tiled_attention.h"
#include "support/tensor_close.h"

namespace tessel::nn {
namespace {

struct TileCase {
  std::string name;
  int64_t tile = 4;
  std::optional<int64_t> window = std::nullopt;
  std::optional<double> softcap = std::nullopt;
  bool documents = false;
};

constexpr int64_t kRows = 2, kQHeads = 6, kKvHeads = 2, kRowLength = 13, kHeadDim = 5;
constexpr double kSoftmaxScale = 0.41;

at::Tensor documents_of_rows() {
  // Row 0: documents of 5, 4 and 4 tokens; row 1: 8 tokens then 5 of padding (-1).
  return at::tensor({0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 7, 7, 7, 7, 7, 7, 7, 7, -1, -1, -1, -1, -1}, at::kLong)
      .view({kRows, kRowLength});
}

// Forward and backward of tiled_causal_attention on a random float64 row of
// `t` tokens against autograd of causal_attention.
void expect_matches_whole_row(const TileCase& c, int64_t t, uint64_t seed) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q0 = at::randn({kRows, kQHeads, t, kHeadDim}, g, f64),
                   k0 = at::randn({kRows, kKvHeads, t, kHeadDim}, g, f64);
  const at::Tensor v0 = at::randn({kRows, kKvHeads, t, kHeadDim}, g, f64),
                   dout = at::randn({kRows, kQHeads, t, kHeadDim}, g, f64);
  const at::Tensor docs = c.documents ? documents_of_rows() : at::Tensor();

  at::Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
  const at::Tensor ref = causal_attention(q, k, v, kSoftmaxScale, c.window, c.softcap, docs);
  ref.backward(dout);

  at::Tensor tq = q0.clone().requires_grad_(), tk = k0.clone().requires_grad_(), tv = v0.clone().requires_grad_();
  const at::Tensor out = tiled_causal_attention(tq, tk, tv, kSoftmaxScale, c.window, c.softcap, docs, c.tile);
  out.backward(dout);
  test_support::expect_allclose(out, ref, 1e-12, "out");
  test_support::expect_allclose(tq.grad(), q.grad(), 1e-11, "dq");
  test_support::expect_allclose(tk.grad(), k.grad(), 1e-11, "dk");
  test_support::expect_allclose(tv.grad(), v.grad(), 1e-11, "dv");
}

class TiledAttention : public ::testing::TestWithParam<TileCase> {};

TEST_P(TiledAttention, MatchesCausalAttentionForwardAndBackward) {
  expect_matches_whole_row(GetParam(), kRowLength, 7);
}

INSTANTIATE_TEST_SUITE_P(Cases, TiledAttention,
                         ::testing::Values(TileCase{"tiles_of_4"}, TileCase{"tiles_of_5_last_short", 5},
                                           TileCase{"one_tile", 13}, TileCase{"tile_longer_than_row", 64},
                                           TileCase{"tiles_of_1", 1}, TileCase{"window_3", 4, 3},
                                           TileCase{"window_longer_than_tile", 3, 7},
                                           TileCase{"softcap", 4, std::nullopt, 1.7},
                                           TileCase{"documents_and_padding", 4, std::nullopt, std::nullopt, true},
                                           TileCase{"everything", 3, 5, 2.5, true}),
                         [](const auto& info) { return info.param.name; });

// float32 views [B, T, heads, D] -> [B, heads, T, D] as Attention passes
// them; the gradients come back in the inputs' dtype and layout.
TEST(TiledAttentionFloat, MatchesOnTransposedFloat32Views) {
  at::manual_seed(3);
  const int64_t t = 40;
  at::Tensor q = at::randn({kRows, t, kQHeads, kHeadDim}).requires_grad_(),
             k = at::randn({kRows, t, kKvHeads, kHeadDim}).requires_grad_();
  at::Tensor v = at::randn({kRows, t, kKvHeads, kHeadDim}).requires_grad_();
  const at::Tensor dout = at::randn({kRows, kQHeads, t, kHeadDim});
  const at::Tensor kt = k.transpose(1, 2), vt = v.transpose(1, 2);
  at::Tensor dkt, dvt;  // the gradients as the function returns them
  kt.register_hook([&dkt](const at::Tensor& g) { dkt = g; });
  vt.register_hook([&dvt](const at::Tensor& g) { dvt = g; });
  const at::Tensor out =
      tiled_causal_attention(q.transpose(1, 2), kt, vt, kSoftmaxScale, std::nullopt, std::nullopt, {}, 16);
  out.backward(dout);
  // Laid out as the views were: the projections' gradients need no copy.
  EXPECT_EQ(dkt.strides(), kt.strides());
  EXPECT_EQ(dvt.strides(), vt.strides());
  ASSERT_EQ(out.scalar_type(), at::kFloat);
  auto as64 = [](const at::Tensor& x) { return x.detach().to(at::kDouble).transpose(1, 2).requires_grad_(); };
  at::Tensor q64 = as64(q), k64 = as64(k), v64 = as64(v);
  const at::Tensor ref = causal_attention(q64, k64, v64, kSoftmaxScale);
  ref.backward(dout.to(at::kDouble));
  test_support::expect_allclose(out.to(at::kDouble), ref, 1e-5, "out");
  test_support::expect_allclose(q.grad().to(at::kDouble), q64.grad().transpose(1, 2), 1e-5, "dq");
  test_support::expect_allclose(k.grad().to(at::kDouble), k64.grad().transpose(1, 2), 1e-5, "dk");
  test_support::expect_allclose(v.grad().to(at::kDouble), v64.grad().transpose(1, 2), 1e-5, "dv");
}

// Rows long enough that the tiles' probabilities outgrow q, k, v and the
// output: backward computes them again (nn/tiled_attention.cpp), short rows
// (the cases above) keep them; both match the whole-row attention.
TEST(TiledAttention, LongRowsRecomputeProbabilitiesAndStillMatch) {
  // 48 tokens in tiles of 4: 6 x ~26 probabilities per token against
  // (2 x 6 + 2 x 2) x 5 = 80 values.
  expect_matches_whole_row(TileCase{"long_row", 4}, 48, 9);
}

TEST(TiledAttentionFloat, RefusesMismatchedShapes) {
  const at::Tensor q = at::zeros({1, 3, 4, 2}), k = at::zeros({1, 2, 4, 2});
  EXPECT_ANY_THROW(tiled_causal_attention(q, k, k, 1.0));  // 3 query heads over 2 kv heads
  EXPECT_ANY_THROW(tiled_causal_attention(q, q, q, 1.0, std::nullopt, std::nullopt, {}, 0));
}

}  // namespace
}  // namespace tessel::nn
