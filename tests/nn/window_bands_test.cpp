// Sliding-window attention in bands of queries (nn/window_bands.h) against
// causal_attention (the plain ATen composition, whole rows with the window
// as a mask), forward and backward in float64: windows that divide the row
// and windows that do not, a window of one, a window longer than the row,
// packed documents, grouped K/V heads. The bands' core here is a plain
// masked softmax; the library's kernel as the core is tested where the
// build has it (library_attention_test.cpp, the GPU's attention_test.cpp).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/window_bands.h"
#include "support/tensor_close.h"

namespace tessel::nn {
namespace {

constexpr double kBandsScale = 0.3;

// softmax(q k^T * scale, hidden keys at -inf) v, K/V heads repeated for their query heads;
// no mask: causal.
at::Tensor masked_softmax_core(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& visible) {
  const int64_t group = q.size(1) / k.size(1);
  const at::Tensor scores = at::matmul(q, k.repeat_interleave(group, 1).transpose(-2, -1)) * kBandsScale;
  const at::Tensor shown =
      visible.defined() ? visible : at::ones({q.size(2), k.size(2)}, at::TensorOptions().dtype(at::kBool)).tril();
  const at::Tensor hidden = scores.masked_fill(shown.logical_not(), -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(hidden, -1), v.repeat_interleave(group, 1));
}

struct BandCase {
  std::string name;
  int64_t T;
  int64_t window;
  bool documents = false;
};

void check_bands(const BandCase& c) {
  SCOPED_TRACE(c.name);
  const int64_t B = 2, Hq = 6, Hkv = 2, D = 8;
  at::manual_seed(23);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q0 = at::randn({B, Hq, c.T, D}, f64), k0 = at::randn({B, Hkv, c.T, D}, f64);
  const at::Tensor v0 = at::randn({B, Hkv, c.T, D}, f64), dout = at::randn({B, Hq, c.T, D}, f64);
  // Documents of 11 positions restarting along each row, row 1 shifted by 3;
  // the last 4 positions of row 0 are padding (-1), as collate writes it.
  at::Tensor docs;
  if (c.documents) {
    docs = (at::arange(c.T, at::kLong).unsqueeze(0) + at::tensor({0, 3}, at::kLong).unsqueeze(1)).div(11, "floor");
    docs.select(0, 0).narrow(0, c.T - 4, 4).fill_(-1);
  }

  at::Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
  const at::Tensor want = causal_attention(q, k, v, kBandsScale, c.window, std::nullopt, docs);
  want.backward(dout);

  // Per call: the rows, queries and keys, and the mask's rows (0: no mask, causal).
  std::vector<std::vector<int64_t>> core_shapes;
  const MaskedAttentionCore core = [&](const at::Tensor& bq, const at::Tensor& bk, const at::Tensor& bv,
                                       const at::Tensor& visible) {
    core_shapes.push_back({bq.size(0), bq.size(2), bk.size(2), visible.defined() ? visible.size(0) : 0});
    return masked_softmax_core(bq, bk, bv, visible);
  };
  at::Tensor bq = q0.clone().requires_grad_(), bk = k0.clone().requires_grad_(), bv = v0.clone().requires_grad_();
  const at::Tensor got = attend_in_window_bands(bq, bk, bv, c.window, docs, core);
  got.backward(dout);

  const double tol = 1e-12;
  test_support::expect_allclose(got, want, tol, "out");
  test_support::expect_allclose(bq.grad(), q.grad(), tol, "dq");
  test_support::expect_allclose(bk.grad(), k.grad(), tol, "dk");
  test_support::expect_allclose(bv.grad(), v.grad(), tol, "dv");

  // Bands of min(w, T) queries: the first causal over its own keys (no
  // mask without documents), the others in one call, each with w - 1 more
  // keys than queries; one mask for every row and band unless documents
  // differ by row.
  const int64_t band = std::min(c.window, c.T);
  const int64_t bands = (c.T + band - 1) / band;
  ASSERT_EQ(core_shapes.size(), bands == 1 ? 1u : 2u);
  EXPECT_EQ(core_shapes[0], (std::vector<int64_t>{B, band, band, c.documents ? B : 0}));
  if (bands > 1) {
    EXPECT_EQ(core_shapes[1], (std::vector<int64_t>{B * (bands - 1), band, band + c.window - 1,
                                                    c.documents ? B * (bands - 1) : 1}));
  }
}

TEST(WindowBands, EqualTheWholeRowWithTheWindowAsAMask) {
  for (const BandCase& c : {BandCase{"window divides the row", 32, 8}, BandCase{"row not whole bands", 37, 8},
                            BandCase{"window of one", 13, 1}, BandCase{"window longer than the row", 9, 20},
                            BandCase{"window of the row", 12, 12}}) {
    check_bands(c);
  }
}

TEST(WindowBands, KeepEachQueryInItsDocument) {
  for (const BandCase& c : {BandCase{"documents longer than the window", 45, 6, true},
                            BandCase{"documents shorter than the window", 45, 16, true}}) {
    check_bands(c);
  }
}

TEST(WindowBands, PayForRowsOfTwoWindowsOrMore) {
  EXPECT_TRUE(window_bands_pay(1024, 512));  // Gemma 3's local layers from 1024 tokens
  EXPECT_TRUE(window_bands_pay(8192, 512));
  EXPECT_FALSE(window_bands_pay(1023, 512));
  EXPECT_TRUE(window_bands_pay(8192, 4096));  // Mistral's window: 3/4 of the whole row's scores
  EXPECT_FALSE(window_bands_pay(100, 0));
}

TEST(WindowBands, BadShapesAreRefused) {
  const at::Tensor q = at::zeros({1, 2, 8, 4}), k = at::zeros({1, 1, 8, 4});
  const MaskedAttentionCore unused = [](const at::Tensor& a, const at::Tensor&, const at::Tensor&,
                                        const at::Tensor&) { return a; };
  EXPECT_THROW(attend_in_window_bands(q, k, at::zeros({1, 1, 7, 4}), 4, {}, unused), std::exception);
  EXPECT_THROW(attend_in_window_bands(q, k, k, 0, {}, unused), std::exception);
  EXPECT_THROW(attend_in_window_bands(q, k, k, 4, at::zeros({1, 7}, at::kLong), unused), std::exception);
}

}  // namespace
}  // namespace tessel::nn
