// The gradient norm's float32 sum of squares against a float64 reference
// computed apart from it (long double accumulation of the exact squares), at
// lengths around its 8 lanes, with values whose squares span many binades.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "optim/sum_of_squares_kernel.h"

namespace tessel::optim {
namespace {

TEST(SumOfSquaresKernel, MatchesLongDoubleAtEveryLength) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 262145}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = std::ldexp(normal(rng), exponent(rng));
    long double want = 0;
    for (float v : x) want += static_cast<long double>(v) * v;
    const double got = sum_of_squares_fp32(x.data(), n);
    // Positive terms summed in order: relative error at most (additions) x
    // 2^-53, here n / 8 per lane plus the lanes and the tail.
    const double bound = static_cast<double>(n / 8 + 16) * std::ldexp(1.0, -53);
    EXPECT_NEAR(got, static_cast<double>(want), bound * static_cast<double>(want)) << "n = " << n;
  }
}

TEST(SumOfSquaresKernel, SquaresAreExactInFloat64) {
  // 1 + 2^-23 squared is 1 + 2^-22 + 2^-46: float32 would round the last term
  // away, float64 keeps it.
  const float v = 1.0f + std::ldexp(1.0f, -23);
  const std::vector<float> x(9, v);  // 8 lanes and the tail
  EXPECT_EQ(sum_of_squares_fp32(x.data(), 9), 9.0 * (1.0 + std::ldexp(1.0, -22) + std::ldexp(1.0, -46)));
}

TEST(SumOfSquaresKernel, NanAndInfinityReachTheSum) {
  std::vector<float> x(20, 1.0f);
  x[13] = std::nanf("");
  EXPECT_TRUE(std::isnan(sum_of_squares_fp32(x.data(), 20)));
  x[13] = -INFINITY;
  EXPECT_TRUE(std::isinf(sum_of_squares_fp32(x.data(), 20)));
}

}  // namespace
}  // namespace tessel::optim
