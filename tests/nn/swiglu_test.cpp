// swiglu_fp32 (silu(g) * u as one node) against HF's formula as plain ATen
// ops in float64 (differentiated by autograd), forward and both gradients;
// its exponential against std::exp in double; and GatedMLP routing float32
// SiLU to it while other dtypes and GELU keep the composition.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "nn/mlp.h"
#include "nn/swiglu.h"
#include "nn/swiglu_kernel.h"

namespace tessel::nn {
namespace {

double max_abs_diff(const at::Tensor& got, const at::Tensor& want) {
  return (got.to(at::kDouble) - want).abs().max().item<double>();
}

TEST(SwiGluKernel, ExponentialWithinTwoUlpsOverItsRange) {
  // Through the vector loop this CPU dispatches to, as the kernels use it.
  std::vector<float> x;
  for (float v = -87.0f; v <= 88.0f; v += 0.000731f) x.push_back(v);
  std::vector<float> y(x.size());
  exp_fp32(x.data(), y.data(), static_cast<int64_t>(x.size()));
  double worst_ulps = 0;
  float worst_at = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    // An ulp of the float nearest the true value.
    const float nearest = static_cast<float>(want);
    const double ulp = std::nextafter(nearest, std::numeric_limits<float>::infinity()) - nearest;
    const double ulps = std::abs(y[i] - want) / ulp;
    if (ulps > worst_ulps) {
      worst_ulps = ulps;
      worst_at = x[i];
    }
  }
  EXPECT_LE(worst_ulps, 2.0) << "at x = " << worst_at;
  auto exp_of = [](float v) {
    float out = 0;
    exp_fp32(&v, &out, 1);
    return out;
  };
  EXPECT_EQ(exp_of(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(exp_of(std::numeric_limits<float>::quiet_NaN())));
  // Clamped outside [-87, 88]: finite, and the sigmoid built on it saturates.
  EXPECT_FLOAT_EQ(exp_of(1000.0f), exp_of(88.0f));
  EXPECT_FLOAT_EQ(exp_of(-1000.0f), exp_of(-87.0f));
}

TEST(SwiGluKernel, MatchesCompositionForwardAndBackward) {
  at::manual_seed(5);
  // Gates of every scale, saturated ones included; a length that is not a
  // multiple of any vector width.
  at::Tensor g = at::randn({3, 7, 41}) * 4.0;
  g.view(-1).narrow(0, 0, 8).copy_(at::tensor({-100.0f, -30.0f, -5.0f, -1e-3f, 0.0f, 1e-3f, 30.0f, 100.0f}));
  g.requires_grad_();
  at::Tensor u = at::randn({3, 7, 41}).requires_grad_();
  const at::Tensor dh = at::randn({3, 7, 41});
  const at::Tensor h = swiglu_fp32(g, u);
  h.backward(dh);

  at::Tensor g64 = g.detach().to(at::kDouble).requires_grad_(), u64 = u.detach().to(at::kDouble).requires_grad_();
  const at::Tensor ref = at::silu(g64) * u64;
  ref.backward(dh.to(at::kDouble));
  // float32 rounding of values up to ~100 x 3, and of gradients alike.
  EXPECT_LT(max_abs_diff(h, ref), 5e-5);
  EXPECT_LT(max_abs_diff(g.grad(), g64.grad()), 5e-5);
  EXPECT_LT(max_abs_diff(u.grad(), u64.grad()), 5e-5);
  // Relative to each element where it is not tiny.
  const at::Tensor big = ref.abs() > 1e-3;
  EXPECT_TRUE(at::allclose(h.to(at::kDouble).masked_select(big), ref.masked_select(big), 1e-6, 0));
}

TEST(SwiGluKernel, HandComputedValues) {
  // silu(0) = 0, σ(0) = 1/2: h = 0, du = 0, dg = dh · u · 1/2.
  at::Tensor g = at::tensor({0.0f, 2.0f}).requires_grad_();
  at::Tensor u = at::tensor({3.0f, -1.0f}).requires_grad_();
  const at::Tensor h = swiglu_fp32(g, u);
  const double s2 = 1.0 / (1.0 + std::exp(-2.0));
  EXPECT_EQ(h[0].item<float>(), 0.0f);
  EXPECT_NEAR(h[1].item<float>(), -2.0 * s2, 1e-6);
  h.backward(at::tensor({1.0f, 1.0f}));
  EXPECT_NEAR(g.grad()[0].item<float>(), 1.5, 1e-7);
  EXPECT_EQ(u.grad()[0].item<float>(), 0.0f);
  EXPECT_NEAR(u.grad()[1].item<float>(), 2.0 * s2, 1e-6);
  EXPECT_NEAR(g.grad()[1].item<float>(), -1.0 * s2 * (1.0 + 2.0 * (1.0 - s2)), 1e-6);
}

TEST(SwiGluKernel, NotANumberPassesThrough) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  at::Tensor g = at::tensor({nan, 1.0f}).requires_grad_();
  at::Tensor u = at::tensor({1.0f, nan}).requires_grad_();
  const at::Tensor h = swiglu_fp32(g, u);
  EXPECT_TRUE(std::isnan(h[0].item<float>()));
  EXPECT_TRUE(std::isnan(h[1].item<float>()));
  h.sum().backward();
  EXPECT_TRUE(std::isnan(g.grad()[0].item<float>()));
  EXPECT_TRUE(std::isnan(u.grad()[0].item<float>()));
}

TEST(SwiGluKernel, GatedMlpUsesItForFloat32SiLUOnly) {
  const at::Tensor g = at::randn({4, 6});
  EXPECT_TRUE(swiglu_fp32_applies(g, at::randn({4, 6})));
  EXPECT_FALSE(swiglu_fp32_applies(g.to(at::kDouble), at::randn({4, 6}).to(at::kDouble)));
  EXPECT_FALSE(swiglu_fp32_applies(g, at::randn({6, 4}).t()));  // not contiguous
  EXPECT_FALSE(swiglu_fp32_applies(g, at::randn({4, 5})));

  // The module's output is the composition's, in float32 and in float64.
  for (const auto dtype : {at::kFloat, at::kDouble}) {
    auto mlp = std::make_shared<GatedMLP>(6, 10, Activation::SiLU, false, at::TensorOptions().dtype(dtype));
    auto params = mlp->named_parameters();
    for (auto& p : params) p.value().detach().normal_(0.0, 0.5);
    const at::Tensor x = at::randn({3, 6}, at::TensorOptions().dtype(dtype));
    auto weight = [&](const char* name) { return params[name].detach(); };
    const at::Tensor want = at::linear(
        at::silu(at::linear(x, weight("gate_proj.weight"))) * at::linear(x, weight("up_proj.weight")),
        weight("down_proj.weight"));
    EXPECT_TRUE(at::allclose(mlp->call(x), want, 1e-5, 1e-6)) << dtype;
  }
}

}  // namespace
}  // namespace tessel::nn
