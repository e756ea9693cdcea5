#include "optim/adamw_kernel.h"

#include <cmath>

namespace tessel::optim {

namespace {
// Loop vectorisation needs GCC's full cost model (-O2 uses the "very cheap"
// one, which refuses a loop whose trip count is not a multiple of the vector
// width). A copy for AVX2 is chosen at load time where the CPU has it (CI
// machines differ): about 1.4x the SSE2 copy here, as the loop is then
// bound by memory. No FMA in either copy, so both round alike.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TESSEL_ADAMW_KERNEL_ATTRIBUTES \
  __attribute__((optimize("vect-cost-model=dynamic"), target_clones("avx2", "default")))
#else
#define TESSEL_ADAMW_KERNEL_ATTRIBUTES
#endif

TESSEL_ADAMW_KERNEL_ATTRIBUTES void update(float* __restrict p, const float* __restrict g,
                                           float* __restrict m, float* __restrict v, int64_t n,
                                           const AdamWCoefficients c) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * c.grad_scale;
    const float mi = m[i] + c.one_minus_b1 * (gi - m[i]);
    const float vi = v[i] * c.b2 + c.one_minus_b2 * gi * gi;
    const float denom = std::sqrt(vi) / c.bc2_sqrt + c.eps;
    p[i] = p[i] * c.decay + c.neg_step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
}
}  // namespace

void adamw_update_fp32(float* p, const float* g, float* m, float* v, int64_t n,
                       const AdamWCoefficients& c) {
  update(p, g, m, v, n, c);
}

}  // namespace tessel::optim
