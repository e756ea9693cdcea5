// rotary_fp32 against HF's x * cos + rotate_half(x) * sin as plain ATen ops
// in float64 (differentiated by autograd), forward and backward, on the
// transposed views Attention passes, with per-row ([B, T, D]) and shared
// ([T, D]) angles; and a hand-computed quarter turn.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "nn/rotary.h"
#include "nn/rotary_kernel.h"

namespace tessel::nn {
namespace {

at::Tensor rotary_reference(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const at::Tensor c = cos.dim() == 3 ? cos.unsqueeze(1) : cos, s = sin.dim() == 3 ? sin.unsqueeze(1) : sin;
  const int64_t half = x.size(-1) / 2;
  return x * c + at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1) * s;
}

class RotaryKernel : public ::testing::TestWithParam<bool> {};

TEST_P(RotaryKernel, MatchesCompositionForwardAndBackward) {
  const bool per_batch = GetParam();
  const int64_t B = 2, T = 7, H = 3, D = 10;
  RotaryEmbedding rope(D, 10000.0);
  const at::Tensor positions = per_batch ? at::tensor({0, 1, 2, 3, 4, 5, 6, 5, 6, 7, 0, 1, 2, 3}, at::kLong).view({B, T})
                                         : at::arange(T, at::kLong);
  const auto [cos, sin] = rope.cos_sin(positions, at::kFloat);
  at::manual_seed(5);
  at::Tensor x = at::randn({B, T, H, D}).requires_grad_();  // projections, viewed as [B, H, T, D]
  const at::Tensor dy = at::randn({B, H, T, D});
  const at::Tensor xt = x.transpose(1, 2);
  ASSERT_TRUE(rotary_fp32_applies(xt, cos, sin));
  at::Tensor dxt;  // the gradient as the kernel returns it, before the transpose's backward
  xt.register_hook([&dxt](const at::Tensor& g) { dxt = g; });
  const at::Tensor y = rotary_fp32(xt, cos, sin);
  y.backward(dy);
  // Laid out as the view was, so x's gradient is that memory as it lies.
  EXPECT_EQ(dxt.strides(), xt.strides());

  at::Tensor x64 = x.detach().to(at::kDouble).requires_grad_();
  const at::Tensor ref = rotary_reference(x64.transpose(1, 2), cos.to(at::kDouble), sin.to(at::kDouble));
  ref.backward(dy.to(at::kDouble));
  EXPECT_TRUE(at::allclose(y.to(at::kDouble), ref, 1e-6, 1e-6)) << (y.to(at::kDouble) - ref).abs().max();
  EXPECT_TRUE(at::allclose(x.grad().to(at::kDouble), x64.grad(), 1e-6, 1e-6))
      << (x.grad().to(at::kDouble) - x64.grad()).abs().max();
  // apply_rotary routes float32 inputs here.
  const at::Tensor via_module = apply_rotary(x.detach().transpose(1, 2), cos, sin);
  EXPECT_TRUE(at::equal(via_module, y.detach()));
}

INSTANTIATE_TEST_SUITE_P(Angles, RotaryKernel, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "per_batch" : "shared"; });

TEST(RotaryKernel, HandComputedQuarterTurn) {
  // D = 2, one pair rotated by 90 degrees: (x1, x2) -> (-x2, x1); backward
  // rotates back: (dy1, dy2) -> (dy2, -dy1).
  at::Tensor x = at::tensor({3.0f, 5.0f}).view({1, 1, 1, 2}).requires_grad_();
  const at::Tensor cos = at::zeros({1, 2}), sin = at::ones({1, 2});
  const at::Tensor y = rotary_fp32(x, cos, sin);
  EXPECT_TRUE(at::equal(y.view({2}), at::tensor({-5.0f, 3.0f})));
  y.backward(at::tensor({1.0f, 2.0f}).view({1, 1, 1, 2}));
  EXPECT_TRUE(at::equal(x.grad().view({2}), at::tensor({2.0f, -1.0f})));
}

TEST(RotaryKernel, OtherInputsKeepTheComposition) {
  const at::Tensor cos = at::ones({4, 6}), sin = at::zeros({4, 6});
  EXPECT_FALSE(rotary_fp32_applies(at::zeros({1, 2, 4, 6}, at::kDouble), cos, sin));
  EXPECT_FALSE(rotary_fp32_applies(at::zeros({1, 2, 4, 6}), cos.unsqueeze(0).expand({1, 4, 6}), sin));
  EXPECT_FALSE(rotary_fp32_applies(at::zeros({1, 2, 6, 4}).transpose(2, 3), cos, sin));  // last dim strided
}

}  // namespace
}  // namespace tessel::nn
