// The fp32 row loops of the softmax cross-entropy (loss/softmax_rows_kernel.h)
// against the same arithmetic in float64 with ATen, on row lengths around
// the loops' 16-lane and 256-element blocks (the remainders' paths), with
// values spread over the exponential's range and -inf (masked) entries.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <vector>

#include "loss/softmax_rows_kernel.h"

namespace tessel::loss {
namespace {

TEST(SoftmaxRowKernels, MatchFloat64OnRowsOfEveryLength) {
  at::manual_seed(5);
  for (const int64_t n : {1, 15, 16, 17, 255, 256, 257, 1000, 8192}) {
    const int64_t rows = 3;
    at::Tensor x = at::randn({rows, n}) * 8.0;
    if (n > 4) x[1][n / 2] = -std::numeric_limits<float>::infinity();  // a masked column
    std::vector<float> max(rows), sum(rows);
    row_max_fp32(x.data_ptr<float>(), rows, n, max.data());
    const at::Tensor xd = x.to(at::kDouble);
    const at::Tensor want_max = std::get<0>(xd.max(1));
    std::vector<float> shift(max);
    shift[2] += 1.5f;  // any shift, not only the max
    row_sum_exp_fp32(x.data_ptr<float>(), shift.data(), rows, n, sum.data());
    const at::Tensor shift_d = at::tensor(std::vector<double>(shift.begin(), shift.end()), at::kDouble);
    const at::Tensor want_sum = (xd - shift_d.unsqueeze(1)).exp().sum(1);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(max[static_cast<std::size_t>(r)], want_max[r].item<double>()) << "n " << n << " row " << r;
      const double w = want_sum[r].item<double>();
      EXPECT_NEAR(sum[static_cast<std::size_t>(r)], w, 2e-6 * w) << "n " << n << " row " << r;
    }

    // The gradient: row 0 takes its label, row 1 is ignored (take false), row
    // 2 takes the last column; each scaled differently.
    const at::Tensor lse = shift_d + want_sum.log();
    const std::vector<float> lse_f{static_cast<float>(lse[0].item<double>()), static_cast<float>(lse[1].item<double>()),
                                   static_cast<float>(lse[2].item<double>())};
    const std::vector<int64_t> column{0, n - 1, n - 1};
    const bool take[] = {true, false, true};
    const std::vector<float> scale{0.5f, 2.0f, 1.0f};
    at::Tensor grad = at::empty({rows, n});
    softmax_cross_entropy_grad_fp32(x.data_ptr<float>(), lse_f.data(), column.data(), take, scale.data(), rows, n,
                                    grad.data_ptr<float>());
    at::Tensor want = (xd - at::tensor(std::vector<double>(lse_f.begin(), lse_f.end()), at::kDouble).unsqueeze(1)).exp();
    want[0][0] -= 1.0;
    want[2][n - 1] -= 1.0;
    want *= at::tensor(std::vector<double>{0.5, 2.0, 1.0}, at::kDouble).unsqueeze(1);
    const double diff = (grad.to(at::kDouble) - want).abs().max().item<double>();
    EXPECT_LT(diff, 1e-6) << "n " << n;
  }
}

TEST(SoftmaxRowKernels, NanInARowReachesItsSum) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::vector<float>& x : {std::vector<float>{0.0f, nan, 1.0f}, std::vector<float>{nan, 0.0f, 1.0f}}) {
    float max = 0, sum = 0;
    row_max_fp32(x.data(), 1, 3, &max);
    row_sum_exp_fp32(x.data(), &max, 1, 3, &sum);
    EXPECT_TRUE(std::isnan(sum));
  }
}

}  // namespace
}  // namespace tessel::loss
