#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>

#include "core/error.h"
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
  EXPECT_EQ(l.num_valid, 2);
  EXPECT_NEAR(l.sum.item<double>(), row0 + std::log(3.0), 1e-6);
  l.sum.backward();
  // The ignored row gets no gradient.
  EXPECT_TRUE(at::equal(logits.grad()[1], at::zeros({3})));
  // Gradient of row 2 is softmax - onehot = (1/3 - 1, 1/3, 1/3).
  EXPECT_NEAR(logits.grad()[2][0].item<double>(), 1.0 / 3 - 1, 1e-6);
}

TEST(CrossEntropy, AllIgnoredGivesZeroSumAndCount) {
  at::Tensor logits = at::randn({2, 4});
  LossSum l = cross_entropy_sum(logits, at::full({2}, kIgnoreIndex, at::kLong));
  EXPECT_EQ(l.num_valid, 0);
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
