// rms_norm_fp32 against HF's formula as plain ATen ops in float64
// (differentiated by autograd), forward and both gradients, for the Llama
// weight (w) and the Gemma one (1 + w); and RMSNorm routing float32 to it
// while other dtypes keep the composition.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "nn/rms_norm.h"
#include "nn/rms_norm_kernel.h"
#include "support/tensor_close.h"

namespace tessel::nn {
namespace {

at::Tensor rms_norm_reference(const at::Tensor& x, const at::Tensor& w, double eps, bool offset) {
  const at::Tensor normed = x * at::rsqrt(x.pow(2).mean({-1}, true) + eps);
  return offset ? normed * (w + 1.0) : w * normed;
}

class RmsNormKernel : public ::testing::TestWithParam<bool> {};

TEST_P(RmsNormKernel, MatchesCompositionForwardAndBackward) {
  const bool offset = GetParam();
  at::manual_seed(11);
  // Rows of very different scales; dim not a multiple of a vector width.
  at::Tensor x = (at::randn({3, 5, 37}) * at::linspace(0.01, 30.0, 5).view({1, 5, 1})).requires_grad_();
  at::Tensor w = (at::randn({37}) * 0.5 + (offset ? 0.0 : 1.0)).requires_grad_();
  const at::Tensor dy = at::randn({3, 5, 37});
  const at::Tensor y = rms_norm_fp32(x, w, 1e-5, offset);
  y.backward(dy);

  at::Tensor x64 = x.detach().to(at::kDouble).requires_grad_(), w64 = w.detach().to(at::kDouble).requires_grad_();
  const at::Tensor ref = rms_norm_reference(x64, w64, 1e-5, offset);
  ref.backward(dy.to(at::kDouble));
  test_support::expect_allclose(y.to(at::kDouble), ref, 2e-6, "y");
  // dx scales as 1/rms: large for the small rows.
  test_support::expect_allclose(x.grad().to(at::kDouble), x64.grad(), 1e-4, "dx");
  test_support::expect_allclose(w.grad().to(at::kDouble), w64.grad(), 1e-5, "dw");
}

INSTANTIATE_TEST_SUITE_P(Styles, RmsNormKernel, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "gemma_offset_weight" : "llama_weight"; });

TEST(RmsNormKernel, HandComputedRow) {
  // x = [3, 4]: mean(x²) = 12.5, 1/rms = 1/sqrt(12.5); w = [2, 1].
  at::Tensor x = at::tensor({3.0f, 4.0f}).view({1, 2}).requires_grad_();
  at::Tensor w = at::tensor({2.0f, 1.0f}).requires_grad_();
  const at::Tensor y = rms_norm_fp32(x, w, 0.0, false);
  const float r = 1.0f / std::sqrt(12.5f);
  EXPECT_NEAR(y[0][0].item<float>(), 6.0f * r, 1e-6);
  EXPECT_NEAR(y[0][1].item<float>(), 4.0f * r, 1e-6);
  y.sum().backward();
  // dw = x̂; dx = r * (w - x̂ * mean(w * x̂)).
  EXPECT_NEAR(w.grad()[0].item<float>(), 3.0f * r, 1e-6);
  const float mean = (2.0f * 3.0f * r + 1.0f * 4.0f * r) / 2.0f;
  EXPECT_NEAR(x.grad()[0][0].item<float>(), r * (2.0f - 3.0f * r * mean), 1e-6);
  EXPECT_NEAR(x.grad()[0][1].item<float>(), r * (1.0f - 4.0f * r * mean), 1e-6);
}

TEST(RmsNormKernel, ModuleUsesKernelForFloat32Only) {
  RMSNorm norm(8, 1e-6, RMSNormStyle::Llama, at::TensorOptions().dtype(at::kFloat));
  norm.weight().detach().uniform_(0.5, 1.5);
  const at::Tensor x = at::randn({4, 8});
  const at::Tensor got = norm.call(x);
  EXPECT_TRUE(at::allclose(got, rms_norm_reference(x, norm.weight().detach(), 1e-6, false), 1e-6, 1e-6));
  EXPECT_TRUE(rms_norm_fp32_applies(x, norm.weight()));
  EXPECT_FALSE(rms_norm_fp32_applies(x.to(at::kDouble), norm.weight()));
  EXPECT_FALSE(rms_norm_fp32_applies(x.t(), norm.weight().narrow(0, 0, 4)));  // not contiguous
}

}  // namespace
}  // namespace tessel::nn
