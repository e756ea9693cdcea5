// The fused head + cross-entropy against the same sum written with ATen's
// autograd ops on the whole logits (log_softmax and a gather), in float64:
// the loss and both gradients, over odd sizes, ignored rows, Gemma's
// softcap, a policy's sampling temperature, one block and many, and float32
// against float64.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "nn/linear_cross_entropy.h"

namespace tessel::nn {
namespace {

constexpr int64_t kIgnore = -100;

struct Sums {
  at::Tensor loss, grad_hidden, grad_weight;
};

// Σ over valid rows of -log_softmax(cap(h · wᵀ))[label], by autograd.
Sums cross_entropy_reference(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                             std::optional<double> cap) {
  at::Tensor h = hidden.detach().clone().set_requires_grad(true);
  at::Tensor w = weight.detach().clone().set_requires_grad(true);
  at::Tensor logits = at::matmul(h, w.t());
  if (cap) logits = at::tanh(logits / *cap) * *cap;
  const at::Tensor flat = logits.reshape({-1, w.size(0)});
  const at::Tensor label = labels.reshape({-1});
  const at::Tensor valid = label.ne(kIgnore);
  const at::Tensor picked =
      at::log_softmax(flat, 1).gather(1, at::where(valid, label, at::zeros_like(label)).unsqueeze(1)).squeeze(1);
  const at::Tensor loss = -(picked * valid.to(picked.scalar_type())).sum();
  loss.backward();
  return {loss.detach(), h.grad(), w.grad()};
}

Sums fused(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels, std::optional<double> cap,
           int64_t block) {
  at::Tensor h = hidden.detach().clone().set_requires_grad(true);
  at::Tensor w = weight.detach().clone().set_requires_grad(true);
  const at::Tensor loss = linear_cross_entropy_sum(h, w, labels, kIgnore, cap, 1.0, block);
  loss.backward();
  return {loss.detach(), h.grad(), w.grad()};
}

void expect_close_to_scale(const at::Tensor& got, const at::Tensor& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double scale = std::max(1.0, want.abs().max().item<double>());
  const double error = (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
  EXPECT_LE(error, tolerance * scale) << what << ": max error " << error << " (scale " << scale << ")";
}

TEST(LinearCrossEntropy, EqualsTheSumOverTheWholeLogitsInFloat64) {
  at::manual_seed(3);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  // Odd sizes: 2 x 7 rows, hidden 13, vocabulary 37; blocks of 1, 5 (the
  // last one short), 37 and the automatic size.
  const at::Tensor hidden = at::randn({2, 7, 13}, f64);
  const at::Tensor weight = at::randn({37, 13}, f64) * 0.7;
  at::Tensor labels = at::randint(0, 37, {2, 7}, at::kLong);
  labels.index_put_({0, 3}, kIgnore);
  labels.index_put_({1, 6}, kIgnore);
  labels.index_put_({1, 0}, 36);  // the last column
  labels.index_put_({1, 1}, 0);   // the first
  for (const std::optional<double> cap : {std::optional<double>{}, std::optional<double>{2.5}}) {
    const Sums want = cross_entropy_reference(hidden, weight, labels, cap);
    for (const int64_t block : {1, 5, 37, 0}) {
      const std::string what = "block " + std::to_string(block) + (cap ? ", softcap 2.5" : "");
      const Sums got = fused(hidden, weight, labels, cap, block);
      expect_close_to_scale(got.loss, want.loss, 1e-12, what + ": loss");
      expect_close_to_scale(got.grad_hidden, want.grad_hidden, 1e-12, what + ": d hidden");
      expect_close_to_scale(got.grad_weight, want.grad_weight, 1e-12, what + ": d weight");
    }
  }
}

// Per position (what DPO and GRPO read as negated log-probabilities), under
// an upstream gradient that differs from row to row: each row against
// -log_softmax(cap(h · wᵀ) / T)[label] by autograd, 0 on ignored rows, both
// gradients, at temperature 1 and at a sampling temperature (0.7), with and
// without the cap (the cap comes first, as CausalLM applies it to the logits
// a sampler divides).
TEST(LinearCrossEntropy, PerRowLossesUnderPerRowGradients) {
  at::manual_seed(4);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor hidden = at::randn({3, 5, 11}, f64);
  const at::Tensor weight = at::randn({29, 11}, f64) * 0.6;
  at::Tensor labels = at::randint(0, 29, {3, 5}, at::kLong);
  labels.index_put_({1, 2}, kIgnore);
  labels.index_put_({2, 4}, kIgnore);
  const at::Tensor upstream = at::randn({3, 5}, f64);
  for (const auto& [cap, temperature] : std::vector<std::pair<std::optional<double>, double>>{
           {std::nullopt, 1.0}, {1.5, 1.0}, {std::nullopt, 0.7}, {1.5, 0.7}}) {
    at::Tensor h = hidden.clone().set_requires_grad(true), w = weight.clone().set_requires_grad(true);
    at::Tensor logits = at::matmul(h, w.t());
    if (cap) logits = at::tanh(logits / *cap) * *cap;
    logits = logits / temperature;
    const at::Tensor valid = labels.ne(kIgnore);
    const at::Tensor want = -at::log_softmax(logits, -1)
                                 .gather(-1, at::where(valid, labels, at::zeros_like(labels)).unsqueeze(-1))
                                 .squeeze(-1) *
                            valid.to(at::kDouble);
    (want * upstream).sum().backward();
    for (const int64_t block : {1, 7, 0}) {
      const std::string what = "block " + std::to_string(block) + (cap ? ", softcap 1.5" : "") + ", temperature " +
                               std::to_string(temperature);
      at::Tensor fh = hidden.clone().set_requires_grad(true), fw = weight.clone().set_requires_grad(true);
      const at::Tensor got = linear_cross_entropy_rows(fh, fw, labels, kIgnore, cap, temperature, block);
      EXPECT_EQ(got.sizes(), labels.sizes()) << what;
      (got * upstream).sum().backward();
      expect_close_to_scale(got.detach(), want.detach(), 1e-12, what + ": rows");
      EXPECT_EQ(got[1][2].item<double>(), 0.0) << what << ": an ignored row";
      expect_close_to_scale(fh.grad(), h.grad(), 1e-12, what + ": d hidden");
      expect_close_to_scale(fw.grad(), w.grad(), 1e-12, what + ": d weight");
    }
  }
}

TEST(LinearCrossEntropy, Float32IsFloat64RoundedAndTheScaleOfTheUpstreamGradientCarries) {
  at::manual_seed(4);
  const at::Tensor hidden = at::randn({33, 24}, at::kDouble);
  const at::Tensor weight = at::randn({101, 24}, at::kDouble) * 0.3;
  const at::Tensor labels = at::randint(0, 101, {33}, at::kLong);
  const Sums want = cross_entropy_reference(hidden, weight, labels, std::nullopt);
  at::Tensor h = hidden.to(at::kFloat).set_requires_grad(true);
  at::Tensor w = weight.to(at::kFloat).set_requires_grad(true);
  const at::Tensor loss = linear_cross_entropy_sum(h, w, labels, kIgnore, std::nullopt, 1.0, 16);
  EXPECT_EQ(loss.scalar_type(), at::kFloat);
  (loss * 0.25).backward();  // as the objective divides by the global count
  expect_close_to_scale(loss, want.loss, 1e-5, "float32 loss");
  expect_close_to_scale(h.grad(), want.grad_hidden * 0.25, 1e-5, "float32 d hidden");
  expect_close_to_scale(w.grad(), want.grad_weight * 0.25, 1e-5, "float32 d weight");
}

TEST(LinearCrossEntropy, EveryRowIgnoredGivesZeroAndZeroGradients) {
  const at::Tensor hidden = at::randn({4, 6}, at::kDouble);
  const at::Tensor weight = at::randn({9, 6}, at::kDouble);
  const Sums got = fused(hidden, weight, at::full({4}, kIgnore, at::kLong), std::nullopt, 4);
  EXPECT_EQ(got.loss.item<double>(), 0.0);
  EXPECT_EQ(got.grad_hidden.abs().max().item<double>(), 0.0);
  EXPECT_EQ(got.grad_weight.abs().max().item<double>(), 0.0);
}

TEST(LinearCrossEntropy, OnlyTheInputsThatNeedAGradientGetOne) {
  at::Tensor h = at::randn({5, 4}, at::kDouble).set_requires_grad(true);
  const at::Tensor w = at::randn({7, 4}, at::kDouble);  // frozen
  linear_cross_entropy_sum(h, w, at::randint(0, 7, {5}, at::kLong), kIgnore).backward();
  EXPECT_TRUE(h.grad().defined());
  EXPECT_FALSE(w.grad().defined());
}

TEST(LinearCrossEntropy, RefusesLabelsOutsideTheVocabularyAndShapesThatDoNotMatch) {
  const at::Tensor h = at::randn({3, 4});
  const at::Tensor w = at::randn({5, 4});
  EXPECT_THROW(linear_cross_entropy_sum(h, w, at::tensor({0, 5, 1}, at::kLong), kIgnore), Error);
  EXPECT_THROW(linear_cross_entropy_sum(h, w, at::tensor({0, -2, 1}, at::kLong), kIgnore), Error);
  EXPECT_THROW(linear_cross_entropy_sum(h, w, at::tensor({0, 1}, at::kLong), kIgnore), Error);
  EXPECT_THROW(linear_cross_entropy_sum(h, at::randn({5, 3}), at::tensor({0, 1, 2}, at::kLong), kIgnore), Error);
  EXPECT_THROW(linear_cross_entropy_sum(h, w, at::tensor({0, 1, 2}, at::kLong), kIgnore, -1.0), Error);
  EXPECT_THROW(linear_cross_entropy_sum(h, w, at::tensor({0, 1, 2}, at::kLong), kIgnore, std::nullopt, 0.0), Error);
  std::string message;
  try {
    linear_cross_entropy_sum(h, w, at::tensor({0, 7, 1}, at::kLong), kIgnore);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("label 7 is outside the vocabulary [0, 5)"), std::string::npos) << message;
}

}  // namespace
}  // namespace tessel::nn
