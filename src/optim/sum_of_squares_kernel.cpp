#include "optim/sum_of_squares_kernel.h"

namespace tessel::optim {

namespace {

// A copy for AVX2 is chosen at load time where the CPU has it (CI machines
// differ); the eight lanes are two 4-wide float64 vectors there.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TESSEL_SUM_OF_SQUARES_ATTRIBUTES \
  __attribute__((optimize("vect-cost-model=dynamic"), target_clones("avx2", "default")))
#else
#define TESSEL_SUM_OF_SQUARES_ATTRIBUTES
#endif

constexpr int kLanes = 8;

TESSEL_SUM_OF_SQUARES_ATTRIBUTES double sum_of_squares(const float* __restrict x, int64_t n) {
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const double v = x[i + j];
      lanes[j] += v * v;
    }
  }
  double total = 0;
  for (; i < n; ++i) {
    const double v = x[i];
    total += v * v;
  }
  for (double lane : lanes) total += lane;
  return total;
}

}  // namespace

double sum_of_squares_fp32(const float* x, int64_t n) { return n > 0 ? sum_of_squares(x, n) : 0.0; }

}  // namespace tessel::optim
