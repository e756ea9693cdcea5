// get_logprobs on one process equals Hugging Face transformers' float64
// log-softmax for every model case of tests/golden (each family, dense and
// mixture-of-experts), at temperatures 1 and 0.6, on a right-padded batch:
// position 0 and every position at or past a row's length are exactly 0.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/error.h"
#include "policy/logprob_goldens.h"
#include "policy/logprobs.h"

namespace tessel::policy {
namespace {

TEST(LogprobsGolden, EveryFamilyMatchesTransformersInFloat64) {
  const dist::DeviceMesh mesh = testing::one_process_mesh();
  for (const auto& name : testing::golden_cases()) {
    SCOPED_TRACE(name);
    const testing::LogprobGolden g = testing::load_logprob_golden(name);
    train::ShardedModel model = testing::golden_model(name, mesh);
    for (size_t t = 0; t < g.temperatures.size(); ++t) {
      const at::Tensor got = get_logprobs(model, mesh, g.input_ids, g.input_lengths, g.temperatures[t]);
      ASSERT_EQ(got.sizes(), g.input_ids.sizes());
      EXPECT_EQ(got.scalar_type(), at::kFloat);
      const double diff = (got.to(at::kDouble) - g.logprobs[t]).abs().max().item<double>();
      EXPECT_LT(diff, 1e-5) << "temperature " << g.temperatures[t];
      for (int64_t b = 0; b < g.input_ids.size(0); ++b) {
        EXPECT_EQ(got[b][0].item<float>(), 0.0f);
        const int64_t n = g.input_lengths[b].item<int64_t>();
        EXPECT_EQ(got[b].narrow(0, n, g.input_ids.size(1) - n).abs().sum().item<float>(), 0.0f) << "row " << b;
      }
    }
  }
}

TEST(LogprobsGolden, BadLengthsAreUsageErrors) {
  const at::Tensor ids = at::zeros({2, 5}, at::kLong);
  EXPECT_THROW(next_token_targets(ids, at::tensor({5, 6}, at::kLong)), UsageError);
  EXPECT_THROW(next_token_targets(ids, at::tensor({0, 2}, at::kLong)), UsageError);
  EXPECT_THROW(next_token_targets(ids, at::tensor({3}, at::kLong)), UsageError);
  const at::Tensor targets = next_token_targets(at::arange(10, at::kLong).view({2, 5}), at::tensor({5, 2}, at::kLong));
  EXPECT_TRUE(at::equal(targets, at::tensor({1, 2, 3, 4, -1, 6, -1, -1, -1, -1}, at::kLong).view({2, 5})));
}

}  // namespace
}  // namespace tessel::policy
