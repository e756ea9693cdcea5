#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>

#include "core/error.h"
#include "loss/chunked_softmax.h"
#include "loss/cross_entropy.h"

namespace tessel::loss {
namespace {

TEST(CrossEntropy, SumMatchesExplicitFormulaAndIgnoresPositions) {
  at::Tensor logits = at::tensor({1.0, 2.0, 0.5, -1.0, 0.0, 3.0, 2.0, 2.0, 2.0}, at::kDouble)
                          .reshape({3, 3}).to(at::kFloat).requires_grad_(true);
  at::Tensor labels = at::tensor(std::vector<int64_t>{1, kIgnoreIndex, 0}, at::kLong);
  LossSum l = cross_entropy_sum(logits, labels);
  // Row 0: log(e^1 + e^2 + e^0.5) - 2; row 2: log(3 e^2) - 2 = log 3.
  const double row0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(0.5)) - 2.0;
  EXPECT_EQ(l.num_valid.item<int64_t>(), 2);
  EXPECT_NEAR(l.sum.item<double>(), row0 + std::log(3.0), 1e-6);
  l.sum.backward();
  // The ignored row gets no gradient.
  EXPECT_TRUE(at::equal(logits.grad()[1], at::zeros({3})));
  // Gradient of row 2 is softmax - onehot = (1/3 - 1, 1/3, 1/3).
  EXPECT_NEAR(logits.grad()[2][0].item<double>(), 1.0 / 3 - 1, 1e-6);
}

// Rows split into several blocks (a vocabulary large enough that a block
// holds 3 rows), the last one short, some rows ignored: the loss and the
// gradient equal log_softmax + nll_loss in float64 (autograd), for float32
// and bfloat16 logits (the gradient comes back in the logits' dtype).
// A device's blocks are 32x the CPU's (launches, not cache, bound them there).
TEST(CrossEntropy, ADevicesBlocksHoldMoreRows) {
  EXPECT_EQ(rows_per_chunk(128256, c10::Device(c10::kCPU)), 8);
  EXPECT_EQ(rows_per_chunk(128256, c10::Device(c10::kCUDA, 0)), 261);
  EXPECT_EQ(rows_per_chunk(int64_t{1} << 26, c10::Device(c10::kCUDA, 0)), 1);
}

TEST(CrossEntropy, BlocksOfRowsMatchLogSoftmaxNll) {
  const int64_t vocab = 300000, n = 10;
  ASSERT_EQ(rows_per_chunk(vocab, c10::Device(c10::kCPU)), 3);
  at::manual_seed(2);
  const at::Tensor base = at::randn({n, vocab}) * 4.0;
  at::Tensor labels = at::randint(vocab, {n}, at::kLong);
  labels[3] = kIgnoreIndex;
  labels[9] = kIgnoreIndex;
  for (const auto dtype : {at::kFloat, at::kBFloat16}) {
    at::Tensor logits = base.to(dtype).clone().requires_grad_();  // a new leaf, also for float32
    const LossSum l = cross_entropy_sum(logits, labels);
    (l.sum * 0.5).backward();
    at::Tensor ref_logits = logits.detach().to(at::kDouble).requires_grad_();
    const at::Tensor ref = at::nll_loss(at::log_softmax(ref_logits, -1), labels, {}, at::Reduction::Sum, kIgnoreIndex);
    (ref * 0.5).backward();
    EXPECT_EQ(l.num_valid.item<int64_t>(), 8);
    EXPECT_NEAR(l.sum.item<double>(), ref.item<double>(), 1e-5 * std::abs(ref.item<double>()));
    ASSERT_EQ(logits.grad().scalar_type(), dtype);
    const double tol = dtype == at::kFloat ? 1e-7 : 4e-3;
    EXPECT_TRUE(at::allclose(logits.grad().to(at::kDouble), ref_logits.grad(), tol, tol))
        << c10::toString(dtype) << " max diff " << (logits.grad().to(at::kDouble) - ref_logits.grad()).abs().max();
    EXPECT_TRUE(at::equal(logits.grad()[3], at::zeros({vocab}, dtype)));
  }
}

TEST(CrossEntropy, AllIgnoredGivesZeroSumAndCount) {
  at::Tensor logits = at::randn({2, 4});
  LossSum l = cross_entropy_sum(logits, at::full({2}, kIgnoreIndex, at::kLong));
  EXPECT_EQ(l.num_valid.item<int64_t>(), 0);
  EXPECT_EQ(l.sum.item<double>(), 0.0);
}

TEST(CrossEntropy, LabelOutsideVocabularyIsAClearError) {
  try {
    cross_entropy_sum(at::randn({2, 4}), at::tensor(std::vector<int64_t>{1, 7}, at::kLong));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 7 is outside the vocabulary [0, 4)"),
              std::string::npos) << e.what();
  }
}

TEST(NextTokenLabels, ShiftsAndMasksPrompt) {
  at::Tensor tokens = at::tensor(std::vector<int64_t>{5, 6, 7, 8}, at::kLong).reshape({1, 4});
  at::Tensor mask = at::tensor(std::vector<int64_t>{0, 0, 1, 1}, at::kLong).reshape({1, 4});  // response = 7, 8
  at::Tensor labels = next_token_labels(tokens, mask);
  std::vector<int64_t> got(labels.data_ptr<int64_t>(), labels.data_ptr<int64_t>() + 4);
  EXPECT_EQ(got, (std::vector<int64_t>{kIgnoreIndex, 7, 8, kIgnoreIndex}));
  at::Tensor all = next_token_labels(tokens);
  std::vector<int64_t> got_all(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + 4);
  EXPECT_EQ(got_all, (std::vector<int64_t>{6, 7, 8, kIgnoreIndex}));
}

}  // namespace
}  // namespace tessel::loss
