// The sampler (policy/sampling.h) against what its definitions say, computed
// here independently in float64: greedy is the argmax; drawn tokens follow
// softmax(logits / T) (frequencies over many streams within 5 sigma); top-k
// and top-p draw only from their sets (the sets built here from a sort); the
// returned log-probs are log softmax(logits / T) of the token before
// filtering; draws are reproducible from (seed, stream, step) alone.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "core/error.h"
#include "policy/sampling.h"

namespace tessel::policy {
namespace {

std::vector<int64_t> streams(int64_t n, int64_t first = 0) {
  std::vector<int64_t> s(static_cast<size_t>(n));
  std::iota(s.begin(), s.end(), first);
  return s;
}

// One logits row repeated over `rows` rows.
at::Tensor repeated(const std::vector<double>& row, int64_t rows) {
  return at::tensor(row, at::kDouble).to(at::kFloat).unsqueeze(0).expand({rows, static_cast<int64_t>(row.size())});
}

std::vector<double> softmax(const std::vector<double>& x, double t) {
  const double m = *std::max_element(x.begin(), x.end());
  std::vector<double> p(x.size());
  double sum = 0.0;
  for (size_t i = 0; i < x.size(); ++i) sum += p[i] = std::exp((x[i] - m) / t);
  for (auto& v : p) v /= sum;
  return p;
}

TEST(Sampling, UniformDrawsAreReproducibleAndUniform) {
  EXPECT_EQ(uniform_draw(7, 3, 11), uniform_draw(7, 3, 11));
  EXPECT_NE(uniform_draw(7, 3, 11), uniform_draw(8, 3, 11));
  EXPECT_NE(uniform_draw(7, 3, 11), uniform_draw(7, 4, 11));
  EXPECT_NE(uniform_draw(7, 3, 11), uniform_draw(7, 3, 12));
  double sum = 0.0, sq = 0.0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = uniform_draw(1, i % 1000, i / 1000);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sq += u * u;
  }
  EXPECT_NEAR(sum / n, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(sq / n - (sum / n) * (sum / n), 1.0 / 12, 2e-3);
}

TEST(Sampling, GreedyTakesTheArgmaxWithTemperatureOneLogprobs) {
  const std::vector<double> row = {0.3, 2.5, -1.0, 2.4, 0.0};
  SamplingOptions o;
  o.greedy = true;
  o.temperature = 0.5;  // ignored when greedy
  const SampledTokens s = sample_tokens(repeated(row, 3), o, streams(3), 0);
  const auto p = softmax(row, 1.0);
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(s.tokens[r].item<int64_t>(), 1);
    EXPECT_NEAR(s.logprobs[r].item<double>(), std::log(p[1]), 1e-6);
  }
}

TEST(Sampling, FrequenciesFollowTheTemperedSoftmax) {
  const std::vector<double> row = {1.0, 0.2, -0.5, 1.6, 0.0, -2.0};
  for (double t : {1.0, 0.6, 1.7}) {
    SamplingOptions o;
    o.temperature = t;
    o.seed = 12345;
    const int64_t n = 20000;
    const SampledTokens s = sample_tokens(repeated(row, n), o, streams(n), 3);
    const auto p = softmax(row, t);
    std::vector<int64_t> count(row.size(), 0);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t tok = s.tokens[r].item<int64_t>();
      ++count[static_cast<size_t>(tok)];
      ASSERT_NEAR(s.logprobs[r].item<double>(), std::log(p[static_cast<size_t>(tok)]), 1e-5);
    }
    for (size_t i = 0; i < row.size(); ++i) {
      const double sigma = std::sqrt(n * p[i] * (1 - p[i]));
      EXPECT_NEAR(static_cast<double>(count[i]), n * p[i], 5 * sigma + 1) << "T " << t << " token " << i;
    }
  }
}

TEST(Sampling, TopKAndTopPDrawOnlyFromTheirSets) {
  const std::vector<double> row = {0.1, 1.2, -0.3, 2.0, 0.9, 1.1, -1.5, 0.4};
  const double t = 0.8;
  const auto p = softmax(row, t);
  std::vector<size_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  struct Case {
    int64_t k;
    double top_p;
  };
  for (const Case c : {Case{3, 1.0}, Case{0, 0.6}, Case{5, 0.7}, Case{1, 1.0}}) {
    // The allowed set: the k most likely, then of those (renormalised) the
    // most likely until their mass reaches top_p.
    const size_t k = c.k > 0 ? static_cast<size_t>(c.k) : row.size();
    double kept_mass = 0.0;
    for (size_t i = 0; i < k; ++i) kept_mass += p[order[i]];
    std::set<int64_t> allowed;
    double before = 0.0;
    for (size_t i = 0; i < k && before < c.top_p; ++i) {
      allowed.insert(static_cast<int64_t>(order[i]));
      before += p[order[i]] / kept_mass;
    }
    SamplingOptions o;
    o.temperature = t;
    o.top_k = c.k;
    o.top_p = c.top_p;
    o.seed = 99;
    const int64_t n = 4000;
    const SampledTokens s = sample_tokens(repeated(row, n), o, streams(n), 0);
    std::set<int64_t> seen;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t tok = s.tokens[r].item<int64_t>();
      seen.insert(tok);
      ASSERT_TRUE(allowed.count(tok)) << "k " << c.k << " p " << c.top_p << " drew " << tok;
      ASSERT_NEAR(s.logprobs[r].item<double>(), std::log(p[static_cast<size_t>(tok)]), 1e-5);
    }
    EXPECT_EQ(seen, allowed) << "k " << c.k << " p " << c.top_p << ": every allowed token is drawn sometimes";
  }
}

TEST(Sampling, ATokenDependsOnItsStreamNotOnItsBatch) {
  at::Tensor logits = at::randn({6, 50}, at::TensorOptions().dtype(at::kFloat));
  SamplingOptions o;
  o.temperature = 1.3;
  o.top_p = 0.9;
  o.seed = 5;
  const std::vector<int64_t> ids = {40, 41, 42, 43, 44, 45};
  const SampledTokens all = sample_tokens(logits, o, ids, 7);
  for (int64_t r = 0; r < 6; ++r) {
    const SampledTokens one = sample_tokens(logits.narrow(0, r, 1), o, {ids[static_cast<size_t>(r)]}, 7);
    EXPECT_EQ(one.tokens[0].item<int64_t>(), all.tokens[r].item<int64_t>());
  }
}

TEST(Sampling, RefusesOutOfRangeOptions) {
  SamplingOptions o;
  o.temperature = 0.0;
  EXPECT_THROW(check_sampling_options(o, "--"), UsageError);
  o.temperature = 1.0;
  o.top_p = 0.0;
  EXPECT_THROW(check_sampling_options(o, "policy.generation."), UsageError);
  o.top_p = 1.5;
  EXPECT_THROW(check_sampling_options(o, "policy.generation."), UsageError);
  o.top_p = 1.0;
  EXPECT_NO_THROW(check_sampling_options(o, "--"));
}

}  // namespace
}  // namespace tessel::policy
