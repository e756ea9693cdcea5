// train::MetricSums: a step's metric sums from host numbers and scalar
// tensors, read together (the tensors in one copy), in first-use order.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/error.h"
#include "train/step_objective.h"

namespace tessel::train {
namespace {

TEST(MetricSums, TensorsAndNumbersAddUpInFirstUseOrder) {
  MetricSums sums;
  sums.add("loss", at::tensor(1.5f));
  sums.add("count", 2.0);
  sums.add("loss", at::tensor(0.25, at::kDouble));
  sums.add("both", 1.0);
  sums.add("both", at::tensor(std::vector<float>{0.5f}));  // one value of any shape
  sums.add("count", 3.0);
  const Metrics got = sums.take();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].first, "loss");
  EXPECT_EQ(got[0].second, 1.75);
  EXPECT_EQ(got[1].first, "count");
  EXPECT_EQ(got[1].second, 5.0);
  EXPECT_EQ(got[2].first, "both");
  EXPECT_EQ(got[2].second, 1.5);
  EXPECT_TRUE(sums.take().empty()) << "take() empties the sums";
}

TEST(MetricSums, TensorsAreSummedInFloat64AsTheHostWould) {
  // float32 values whose float32 sum rounds: the sum is the float64 one.
  MetricSums sums;
  double want = 0.0;
  for (int i = 0; i < 10; ++i) {
    const float v = 16777216.0f + static_cast<float>(i);  // 2^24 + i
    sums.add("x", at::tensor(v));
    want += static_cast<double>(v);
  }
  EXPECT_EQ(sums.take()[0].second, want);
}

TEST(MetricSums, TheCallersTensorIsNotChanged) {
  MetricSums sums;
  at::Tensor mine = at::tensor(1.0, at::kDouble);
  sums.add("x", mine);
  sums.add("x", at::tensor(2.0, at::kDouble));
  EXPECT_EQ(sums.take()[0].second, 3.0);
  EXPECT_EQ(mine.item<double>(), 1.0);
}

TEST(MetricSums, AMetricOfSeveralValuesIsRefused) {
  MetricSums sums;
  EXPECT_THROW(sums.add("x", at::ones({2})), Error);
}

}  // namespace
}  // namespace tessel::train
