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

namespace tessel::nn {
namespace {

struct Case {
  std::string name;
  int64_t tile = 4;
  std::optional<int64_t> window = std::nullopt;
  std::optional<double> softcap = std::nullopt;
  bool documents = false;
};

constexpr int64_t B = 2, Hq = 6, Hkv = 2, T = 13, D = 5;
constexpr double kScale = 0.41;

at::Tensor documents_of_rows() {
  // Row 0: documents of 5, 4 and 4 tokens; row 1: 8 tokens then 5 of padding (-1).
  return at::tensor({0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 7, 7, 7, 7, 7, 7, 7, 7, -1, -1, -1, -1, -1}, at::kLong)
      .view({B, T});
}

void expect_close(const at::Tensor& got, const at::Tensor& want, double tol, const std::string& what) {
  EXPECT_TRUE(at::allclose(got, want, tol, tol)) << what << " max diff " << (got - want).abs().max().item<double>();
}

// Forward and backward of tiled_causal_attention on a random float64 row of
// `t` tokens against autograd of causal_attention.
void expect_matches_whole_row(const Case& c, int64_t t, uint64_t seed) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q0 = at::randn({B, Hq, t, D}, g, f64), k0 = at::randn({B, Hkv, t, D}, g, f64);
  const at::Tensor v0 = at::randn({B, Hkv, t, D}, g, f64), dout = at::randn({B, Hq, t, D}, g, f64);
  const at::Tensor docs = c.documents ? documents_of_rows() : at::Tensor();

  at::Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
  const at::Tensor ref = causal_attention(q, k, v, kScale, c.window, c.softcap, docs);
  ref.backward(dout);

  at::Tensor tq = q0.clone().requires_grad_(), tk = k0.clone().requires_grad_(), tv = v0.clone().requires_grad_();
  const at::Tensor out = tiled_causal_attention(tq, tk, tv, kScale, c.window, c.softcap, docs, c.tile);
  out.backward(dout);
  expect_close(out, ref, 1e-12, "out");
  expect_close(tq.grad(), q.grad(), 1e-11, "dq");
  expect_close(tk.grad(), k.grad(), 1e-11, "dk");
  expect_close(tv.grad(), v.grad(), 1e-11, "dv");
}

class TiledAttention : public ::testing::TestWithParam<Case> {};

TEST_P(TiledAttention, MatchesCausalAttentionForwardAndBackward) { expect_matches_whole_row(GetParam(), T, 7); }

INSTANTIATE_TEST_SUITE_P(
    Cases, TiledAttention,
    ::testing::Values(Case{"tiles_of_4"}, Case{"tiles_of_5_last_short", 5}, Case{"one_tile", 13},
                      Case{"tile_longer_than_row", 64}, Case{"tiles_of_1", 1}, Case{"window_3", 4, 3},
                      Case{"window_longer_than_tile", 3, 7}, Case{"softcap", 4, std::nullopt, 1.7},
                      Case{"documents_and_padding", 4, std::nullopt, std::nullopt, true},
                      Case{"everything", 3, 5, 2.5, true}),
    [](const auto& info) { return info.param.name; });

// float32 views [B, T, heads, D] -> [B, heads, T, D] as Attention passes
// them; the gradients come back in the inputs' dtype and layout.
TEST(TiledAttentionFloat, MatchesOnTransposedFloat32Views) {
  at::manual_seed(3);
  const int64_t t = 40;
  at::Tensor q = at::randn({B, t, Hq, D}).requires_grad_(), k = at::randn({B, t, Hkv, D}).requires_grad_();
  at::Tensor v = at::randn({B, t, Hkv, D}).requires_grad_();
  const at::Tensor dout = at::randn({B, Hq, t, D});
  const at::Tensor kt = k.transpose(1, 2), vt = v.transpose(1, 2);
  at::Tensor dkt, dvt;  // the gradients as the function returns them
  kt.register_hook([&dkt](const at::Tensor& g) { dkt = g; });
  vt.register_hook([&dvt](const at::Tensor& g) { dvt = g; });
  const at::Tensor out = tiled_causal_attention(q.transpose(1, 2), kt, vt, kScale, std::nullopt, std::nullopt, {}, 16);
  out.backward(dout);
  // Laid out as the views were: the projections' gradients need no copy.
  EXPECT_EQ(dkt.strides(), kt.strides());
  EXPECT_EQ(dvt.strides(), vt.strides());
  ASSERT_EQ(out.scalar_type(), at::kFloat);
  auto as64 = [](const at::Tensor& x) { return x.detach().to(at::kDouble).transpose(1, 2).requires_grad_(); };
  at::Tensor q64 = as64(q), k64 = as64(k), v64 = as64(v);
  const at::Tensor ref = causal_attention(q64, k64, v64, kScale);
  ref.backward(dout.to(at::kDouble));
  expect_close(out.to(at::kDouble), ref, 1e-5, "out");
  expect_close(q.grad().to(at::kDouble), q64.grad().transpose(1, 2), 1e-5, "dq");
  expect_close(k.grad().to(at::kDouble), k64.grad().transpose(1, 2), 1e-5, "dk");
  expect_close(v.grad().to(at::kDouble), v64.grad().transpose(1, 2), 1e-5, "dv");
}

// Rows long enough that the tiles' probabilities outgrow q, k, v and the
// output: backward computes them again (nn/tiled_attention.cpp), short rows
// (the cases above) keep them; both match the whole-row attention.
TEST(TiledAttention, LongRowsRecomputeProbabilitiesAndStillMatch) {
  // 48 tokens in tiles of 4: 6 x ~26 probabilities per token against
  // (2 x 6 + 2 x 2) x 5 = 80 values.
  expect_matches_whole_row(Case{"long_row", 4}, 48, 9);
}

TEST(TiledAttentionFloat, RefusesMismatchedShapes) {
  const at::Tensor q = at::zeros({1, 3, 4, 2}), k = at::zeros({1, 2, 4, 2});
  EXPECT_ANY_THROW(tiled_causal_attention(q, k, k, 1.0));  // 3 query heads over 2 kv heads
  EXPECT_ANY_THROW(tiled_causal_attention(q, q, q, 1.0, std::nullopt, std::nullopt, {}, 0));
}

}  // namespace
}  // namespace tessel::nn
