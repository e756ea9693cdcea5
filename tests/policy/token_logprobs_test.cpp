// policy::token_logprobs against ATen's log_softmax in float64: values and
// gradients, at several temperatures, with rows that have no target, with
// 16-bit logits, and over a vocabulary wide enough that the rows are
// processed in several blocks.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/error.h"
#include "loss/chunked_softmax.h"
#include "policy/token_logprobs.h"

namespace tessel::policy {
namespace {

// log_softmax(logits / T)[target] in float64, 0 where target < 0.
at::Tensor reference(const at::Tensor& logits, const at::Tensor& targets, double temperature) {
  const at::Tensor logp = at::log_softmax(logits.to(at::kDouble) / temperature, -1);
  const at::Tensor safe = targets.clamp_min(0);
  const at::Tensor picked = logp.gather(1, safe.unsqueeze(1)).squeeze(1);
  return at::where(targets.ge(0), picked, at::zeros_like(picked));
}

at::Tensor targets_with_gaps(int64_t rows, int64_t vocab) {
  at::Tensor t = at::randint(0, vocab, {rows}, at::kLong);
  for (int64_t i = 0; i < rows; i += 3) t[i] = -1;  // every third row has no target
  return t;
}

TEST(TokenLogprobs, ValuesAndGradientsMatchLogSoftmaxAtEachTemperature) {
  at::manual_seed(3);
  const int64_t rows = 11, vocab = 37;
  const at::Tensor targets = targets_with_gaps(rows, vocab);
  for (double temperature : {1.0, 0.6, 1.7}) {
    SCOPED_TRACE(temperature);
    const at::Tensor base = at::randn({rows, vocab}) * 3;
    const at::Tensor weights = at::randn({rows}, at::kDouble);
    at::Tensor x = base.clone().requires_grad_(true);
    const at::Tensor got = token_logprobs(x, targets, temperature, {});
    (got.to(at::kDouble) * weights).sum().backward();
    at::Tensor x64 = base.to(at::kDouble).requires_grad_(true);
    const at::Tensor want = reference(x64, targets, temperature);
    (want * weights).sum().backward();
    EXPECT_EQ(got.scalar_type(), at::kFloat);
    EXPECT_TRUE(at::allclose(got.to(at::kDouble), want, 0, 2e-6)) << (got.to(at::kDouble) - want).abs().max();
    EXPECT_TRUE(at::allclose(x.grad().to(at::kDouble), x64.grad(), 0, 1e-6))
        << (x.grad().to(at::kDouble) - x64.grad()).abs().max();
    // Rows without a target: log-prob 0 and no gradient.
    EXPECT_EQ(got[0].item<float>(), 0.0f);
    EXPECT_EQ(x.grad()[0].abs().sum().item<float>(), 0.0f);
  }
}

TEST(TokenLogprobs, ManyBlocksOfRows) {
  at::manual_seed(5);
  const int64_t vocab = 50000, rows = 3 * loss::rows_per_chunk(vocab, c10::Device(c10::kCPU)) + 7;
  const at::Tensor base = at::randn({rows, vocab});
  const at::Tensor targets = targets_with_gaps(rows, vocab);
  for (double temperature : {1.0, 0.8}) {
    at::Tensor x = base.clone().requires_grad_(true);
    const at::Tensor got = token_logprobs(x, targets, temperature, {});
    got.sum().backward();
    at::Tensor x64 = base.to(at::kDouble).requires_grad_(true);
    reference(x64, targets, temperature).sum().backward();
    EXPECT_TRUE(at::allclose(got.to(at::kDouble), reference(base, targets, temperature), 0, 2e-5));
    EXPECT_TRUE(at::allclose(x.grad().to(at::kDouble), x64.grad(), 0, 1e-6));
  }
}

TEST(TokenLogprobs, SixteenBitLogitsAreComputedInFloat32) {
  at::manual_seed(7);
  const at::Tensor base = at::randn({9, 40}).to(at::kBFloat16);
  const at::Tensor targets = targets_with_gaps(9, 40);
  at::Tensor x = base.clone().requires_grad_(true);
  const at::Tensor got = token_logprobs(x, targets, 0.7, {});
  got.sum().backward();
  EXPECT_EQ(got.scalar_type(), at::kFloat);
  EXPECT_EQ(x.grad().scalar_type(), at::kBFloat16);
  // Exact bf16 inputs, float32 arithmetic: float32 rounding only.
  EXPECT_TRUE(at::allclose(got.to(at::kDouble), reference(base, targets, 0.7), 0, 2e-6));
}

TEST(TokenLogprobs, BadInputIsRefused) {
  const at::Tensor x = at::randn({2, 5});
  EXPECT_THROW(token_logprobs(x, at::tensor({1, 5}, at::kLong), 1.0, {}), Error);  // 5 is outside [0, 5)
  EXPECT_THROW(token_logprobs(x, at::tensor({1, 2}, at::kLong), 0.0, {}), UsageError);
  EXPECT_THROW(token_logprobs(x, at::tensor({1, 2, 3}, at::kLong), 1.0, {}), Error);
  // Narrower than the vocabulary with nobody holding the rest.
  EXPECT_THROW(token_logprobs(x, at::tensor({1, 2}, at::kLong), 1.0, {0, 10, nullptr}), Error);
}

}  // namespace
}  // namespace tessel::policy
