#include "loss/softmax_rows_kernel.h"

#include <algorithm>
#include <cstdint>

#include "core/exp_lanes.h"

namespace tessel::loss {

namespace {

using core::exp_lanes;

// Running sums and maxima kept in 16 lanes (two AVX2 vectors) so that the
// reductions vectorise without reassociating one float sum.
constexpr int64_t kLanes = 16;
constexpr int64_t kBlock = 256;

// As in nn/swiglu_kernel.cpp: GCC's full cost model, and copies for
// x86-64-v4 (AVX-512) and x86-64-v3 (AVX2 with FMA) chosen at load time
// where the CPU has them. The 16 lanes fix the summation order, so the
// copies' sums differ only by the FMA contraction inside exp_lanes.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TESSEL_SOFTMAX_KERNEL_ATTRIBUTES \
  __attribute__((optimize("vect-cost-model=dynamic"), target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TESSEL_SOFTMAX_KERNEL_ATTRIBUTES
#endif

TESSEL_SOFTMAX_KERNEL_ATTRIBUTES float max_of(const float* __restrict x, int64_t n) {
  float lanes[kLanes];
  for (int64_t k = 0; k < kLanes; ++k) lanes[k] = x[0];
  const int64_t whole = n - n % kLanes;
  for (int64_t i = 0; i < whole; i += kLanes) {
    for (int64_t k = 0; k < kLanes; ++k) lanes[k] = x[i + k] > lanes[k] ? x[i + k] : lanes[k];
  }
  float m = x[0];
  for (int64_t k = 0; k < kLanes; ++k) m = lanes[k] > m ? lanes[k] : m;
  for (int64_t i = whole; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// Σ e^(x[i] - shift) over at most kBlock elements.
TESSEL_SOFTMAX_KERNEL_ATTRIBUTES float block_sum_exp(const float* __restrict x, float shift, int64_t n) {
  float e[kBlock];
  for (int64_t i = 0; i < n; ++i) e[i] = exp_lanes(x[i] - shift);
  float lanes[kLanes] = {};
  const int64_t whole = n - n % kLanes;
  for (int64_t i = 0; i < whole; i += kLanes) {
    for (int64_t k = 0; k < kLanes; ++k) lanes[k] += e[i + k];
  }
  float sum = 0;
  for (int64_t k = 0; k < kLanes; ++k) sum += lanes[k];
  for (int64_t i = whole; i < n; ++i) sum += e[i];
  return sum;
}

TESSEL_SOFTMAX_KERNEL_ATTRIBUTES void scaled_softmax(const float* __restrict x, float lse, float scale,
                                                     float* __restrict grad, int64_t n) {
  for (int64_t i = 0; i < n; ++i) grad[i] = exp_lanes(x[i] - lse) * scale;
}

}  // namespace

void row_max_fp32(const float* x, int64_t rows, int64_t n, float* out) {
  for (int64_t r = 0; r < rows; ++r) out[r] = max_of(x + r * n, n);
}

void row_sum_exp_fp32(const float* x, const float* shift, int64_t rows, int64_t n, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t begin = 0; begin < n; begin += kBlock) {
      sum += block_sum_exp(x + r * n + begin, shift[r], std::min(kBlock, n - begin));
    }
    out[r] = static_cast<float>(sum);
  }
}

void softmax_cross_entropy_grad_fp32(const float* x, const float* lse, const int64_t* column, const bool* take,
                                     const float* scale, int64_t rows, int64_t n, float* grad) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = grad + r * n;
    scaled_softmax(x + r * n, lse[r], scale[r], row, n);
    if (take[r]) row[column[r]] -= scale[r];
  }
}

}  // namespace tessel::loss
