// The float32 products through oneDNN's sgemm (nn/onednn_sgemm.h) and
// Linear's autograd node built on them (nn/linear_product.h), against ATen's
// products in float64: every operand layout sgemm reads in place (row-major,
// transposed views, row and column slices, size-1 dimensions) and the ones it
// must copy first; forward and all three gradients, with and without bias;
// and when Linear chooses the node (TESSEL_GEMM and the CPU).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/version.h>

#include <dlfcn.h>

#include <string>

#include "core/error.h"
#include "nn/linear_product.h"
#include "nn/onednn_sgemm.h"

namespace tessel::nn {
namespace {

double max_rel_diff(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor w = want.to(at::kDouble);
  return ((got.to(at::kDouble) - w).abs().max() / w.abs().max().clamp_min(1e-30)).item<double>();
}

std::string node_name(const at::Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : "(leaf)"; }

TEST(OneDnnSgemm, FoundWithDebiansLibtorch) {
  // Debian's libtorch 1.13 links libdnnl.so.2; a lookup that silently failed
  // would leave every product on the BLAS (and the tests below skipped).
  if (TORCH_VERSION_MAJOR >= 2) GTEST_SKIP() << "PyPI's libtorch 2.x does not export oneDNN";
  EXPECT_NE(dlsym(RTLD_DEFAULT, "dnnl_sgemm"), nullptr);
  EXPECT_TRUE(onednn_sgemm_found());
}

TEST(OneDnnSgemm, ChoiceFollowsTesselGemmAndTheCpu) {
  for (const char* unset_or_auto : {static_cast<const char*>(nullptr), "", "auto"}) {
    EXPECT_TRUE(use_onednn_sgemm(unset_or_auto, true, true));
    EXPECT_FALSE(use_onednn_sgemm(unset_or_auto, true, false));  // AVX2 only: measured no faster
    EXPECT_FALSE(use_onednn_sgemm(unset_or_auto, false, true));
  }
  EXPECT_TRUE(use_onednn_sgemm("onednn", true, false));
  EXPECT_THROW(use_onednn_sgemm("onednn", false, true), UsageError);  // forced but absent
  EXPECT_FALSE(use_onednn_sgemm("aten", true, true));
  EXPECT_THROW(use_onednn_sgemm("mkl", true, true), UsageError);
}

TEST(OneDnnSgemm, MatchesMmOnEveryLayout) {
  if (!onednn_sgemm_found()) GTEST_SKIP() << "no oneDNN in this process";
  at::manual_seed(3);
  // [M, K] operands as sgemm meets them: each made from a float64 original
  // the reference multiplies.
  struct Case {
    std::string name;
    at::Tensor a, b;
  };
  const at::Tensor base_a = at::randn({37, 53}, at::kDouble), base_b = at::randn({53, 29}, at::kDouble);
  const at::Tensor wide = at::randn({37, 80}, at::kDouble), tall = at::randn({90, 29}, at::kDouble);
  std::vector<Case> cases = {
      {"row-major x row-major", base_a, base_b},
      {"transposed x row-major", base_a.t().contiguous().t(), base_b},
      {"row-major x transposed", base_a, base_b.t().contiguous().t()},
      {"transposed x transposed", base_a.t().contiguous().t(), base_b.t().contiguous().t()},
      {"column slice (ld > K) x row slice", wide.narrow(1, 5, 53), tall.narrow(0, 7, 53)},
      {"transposed slice (ld > M)", at::randn({80, 50}, at::kDouble).narrow(0, 5, 53).narrow(1, 3, 37).t(), base_b},
      {"every other column (copied)", at::randn({37, 106}, at::kDouble).slice(1, 0, 106, 2), base_b},
      {"one row", base_a.narrow(0, 4, 1), base_b},
      {"one column", base_a, base_b.narrow(1, 3, 1)},
      {"inner size one", base_a.narrow(1, 0, 1), base_b.narrow(0, 0, 1)},
      {"column vector times row vector, strided", wide.narrow(1, 9, 1), tall.narrow(0, 2, 1)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    // The same strides in float32: to(kFloat) would make them contiguous.
    const at::Tensor a = at::empty_strided(c.a.sizes(), c.a.strides(), at::kFloat);
    const at::Tensor b = at::empty_strided(c.b.sizes(), c.b.strides(), at::kFloat);
    a.copy_(c.a);
    b.copy_(c.b);
    ASSERT_TRUE(onednn_mm_applies(a, b));
    const at::Tensor got = onednn_mm(a, b);
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_EQ(got.sizes(), (std::vector<int64_t>{a.size(0), b.size(1)}));
    EXPECT_LT(max_rel_diff(got, at::mm(a.to(at::kDouble), b.to(at::kDouble))), 1e-5);
  }
}

TEST(OneDnnSgemm, BatchedMatchesBmmOnTheAttentionsLayouts) {
  if (!onednn_sgemm_found()) GTEST_SKIP() << "no oneDNN in this process";
  at::manual_seed(4);
  // Float32 views as the attention's tiles meet them: keys transposed per
  // batch, a narrowed run of columns, an expanded operand (batch stride 0),
  // a layout that must be copied, a batch of one.
  const at::Tensor q = at::randn({6, 40, 16}), keys = at::randn({6, 24, 16});
  const at::Tensor probs = at::randn({6, 40, 24}), wide = at::randn({6, 24, 30});
  struct Case {
    std::string name;
    at::Tensor a, b;
  };
  const std::vector<Case> cases = {
      {"scores: q x keys transposed", q, keys.transpose(1, 2)},
      {"output: probabilities x narrowed values", probs, wide.narrow(2, 3, 16)},
      {"transposed probabilities x rows", probs.transpose(1, 2), q},
      {"expanded left operand", at::randn({1, 40, 24}).expand({6, 40, 24}), wide},
      {"every other row (copied)", at::randn({6, 80, 24}).slice(1, 0, 80, 2), wide},
      {"one batch", probs.narrow(0, 2, 1), wide.narrow(0, 5, 1)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(onednn_bmm_applies(c.a, c.b));
    const at::Tensor got = onednn_bmm(c.a, c.b);
    EXPECT_TRUE(got.is_contiguous());
    EXPECT_EQ(got.sizes(), (std::vector<int64_t>{c.a.size(0), c.a.size(1), c.b.size(2)}));
    EXPECT_LT(max_rel_diff(got, at::bmm(c.a.to(at::kDouble), c.b.to(at::kDouble))), 1e-5);
  }
  EXPECT_FALSE(onednn_bmm_applies(q, keys));                                // inner sizes differ
  EXPECT_FALSE(onednn_bmm_applies(q, q.narrow(0, 0, 3).transpose(1, 2)));  // batch counts differ
  EXPECT_FALSE(onednn_bmm_applies(q.to(at::kDouble), keys.transpose(1, 2).to(at::kDouble)));
}

TEST(OneDnnSgemm, DeclinesWhatItCannotTake) {
  const at::Tensor a = at::randn({4, 5}), b = at::randn({5, 3});
  EXPECT_FALSE(onednn_mm_applies(a.to(at::kDouble), b.to(at::kDouble)));
  EXPECT_FALSE(onednn_mm_applies(a.to(at::kBFloat16), b.to(at::kBFloat16)));
  EXPECT_FALSE(onednn_mm_applies(a, b.t()));  // inner sizes differ
  EXPECT_FALSE(onednn_mm_applies(a.narrow(0, 0, 0), b));
  EXPECT_FALSE(onednn_mm_applies(a.view({2, 2, 5}), b));
  EXPECT_THROW(onednn_mm(a, b.t()), std::exception);
}

// x [2, 9, 24] · w [16, 24]ᵀ (+ b) through the oneDNN node against
// at::linear in float64.
void check_onednn_linear(bool with_bias, bool x_needs_grad) {
  if (!onednn_sgemm_found()) GTEST_SKIP() << "no oneDNN in this process";
  at::manual_seed(with_bias ? 11 : 12);
  const at::Tensor x64 = at::randn({2, 9, 24}, at::kDouble), w64 = at::randn({16, 24}, at::kDouble);
  const at::Tensor b64 = at::randn({16}, at::kDouble);
  // The gradient arrives transposed-and-back (not contiguous), as a
  // consumer that read y through a view would send it.
  const at::Tensor dy64 = at::randn({16, 9, 2}, at::kDouble).permute({2, 1, 0});

  const at::Tensor x = x64.to(at::kFloat).set_requires_grad(x_needs_grad);
  const at::Tensor w = w64.to(at::kFloat).set_requires_grad(true);
  const at::Tensor b = with_bias ? b64.to(at::kFloat).set_requires_grad(true) : at::Tensor();
  ASSERT_TRUE(onednn_linear_applies(x, w, b));
  const at::Tensor y = onednn_linear(x, w, b);
  EXPECT_NE(node_name(y).find("LinearFunction"), std::string::npos) << node_name(y);
  y.backward(dy64.to(at::kFloat));

  const at::Tensor rx = x64.clone().set_requires_grad(true), rw = w64.clone().set_requires_grad(true);
  const at::Tensor rb = with_bias ? b64.clone().set_requires_grad(true) : at::Tensor();
  const at::Tensor ry = at::linear(rx, rw, rb);
  ry.backward(dy64);

  EXPECT_EQ(y.sizes(), ry.sizes());
  EXPECT_LT(max_rel_diff(y, ry), 1e-5);
  EXPECT_LT(max_rel_diff(w.grad(), rw.grad()), 1e-5);
  EXPECT_EQ(w.grad().sizes(), w.sizes());
  if (x_needs_grad) {
    EXPECT_LT(max_rel_diff(x.grad(), rx.grad()), 1e-5);
    EXPECT_EQ(x.grad().sizes(), x.sizes());
  } else {
    EXPECT_FALSE(x.grad().defined());
  }
  if (with_bias) {
    EXPECT_LT(max_rel_diff(b.grad(), rb.grad()), 1e-5);
  }
}

TEST(LinearProduct, MatchesLinearWithoutBias) { check_onednn_linear(false, true); }
TEST(LinearProduct, MatchesLinearWithBias) { check_onednn_linear(true, true); }
TEST(LinearProduct, WeightGradientOnlyWhenTheInputNeedsNone) { check_onednn_linear(true, false); }

TEST(LinearProduct, LinearUsesTheNodeWherePreferred) {
  const at::Tensor x = at::randn({3, 8}).set_requires_grad(true);
  const at::Tensor w = at::randn({5, 8}).set_requires_grad(true);
  const at::Tensor y = linear_product(x, w, at::Tensor());
  EXPECT_EQ(node_name(y).find("LinearFunction") != std::string::npos, onednn_sgemm_preferred()) << node_name(y);
  EXPECT_TRUE(at::allclose(y, at::linear(x, w), 1e-5, 1e-6));
}

TEST(LinearProduct, OtherDtypesKeepAtenLinear) {
  const at::Tensor x = at::randn({3, 8}, at::kDouble).set_requires_grad(true);
  const at::Tensor w = at::randn({5, 8}, at::kDouble).set_requires_grad(true);
  EXPECT_FALSE(onednn_linear_applies(x, w, at::Tensor()));
  const at::Tensor y = linear_product(x, w, at::Tensor());
  EXPECT_EQ(node_name(y).find("LinearFunction"), std::string::npos) << node_name(y);
  EXPECT_TRUE(at::allclose(y, at::linear(x, w)));
  EXPECT_THROW(onednn_linear(x, w, at::Tensor()), std::exception);
}

}  // namespace
}  // namespace tessel::nn
