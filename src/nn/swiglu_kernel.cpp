#include "nn/swiglu_kernel.h"

#include <bit>
#include <cstdint>

namespace tessel::nn {

namespace {

// Branch-free, so that a loop calling it vectorises: the clamp is two selects,
// the rounding to an integer an add and subtract of 1.5 · 2^23 (which leaves
// the integer in the low mantissa bits), 2^n a shift of those bits into the
// exponent field; no float-to-int conversion and no table.
[[gnu::always_inline]] inline float exp_lanes(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 · 2^23
  // ln 2 split so that n · kLn2High is exact for |n| <= 2^9 (Cephes).
  constexpr float kLn2High = 0.693359375f;
  constexpr float kLn2Low = -2.12194440e-4f;
  x = x < -87.0f ? -87.0f : x;  // selects, not std::min/max (references): they vectorise
  x = x > 88.0f ? 88.0f : x;
  const float shifted = x * kLog2e + kRoundMagic;  // n in the low mantissa bits
  const float n = shifted - kRoundMagic;
  const float r = (x - n * kLn2High) - n * kLn2Low;  // |r| <= ln 2 / 2
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r2 + r + 1.0f;
  // n + 127 (1..254 after the clamp) moved into the exponent field: 2^n.
  const float scale = std::bit_cast<float>(std::bit_cast<uint32_t>(shifted + 127.0f) << 23);
  return er * scale;
}

[[gnu::always_inline]] inline float sigmoid_lanes(float x) { return 1.0f / (1.0f + exp_lanes(-x)); }

// Loop vectorisation needs GCC's full cost model (-O2's "very cheap" one
// refuses a loop whose trip count is not a multiple of the vector width). A
// copy for x86-64-v3 (AVX2 with FMA) is chosen at load time where the CPU
// has it (CI machines differ): its polynomial and products fuse into FMAs,
// about 1.7x the SSE2 copy's speed here, and may differ from it in the last
// bit (both within the accuracy the header states).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TESSEL_SWIGLU_KERNEL_ATTRIBUTES \
  __attribute__((optimize("vect-cost-model=dynamic"), target_clones("arch=x86-64-v3", "default")))
#else
#define TESSEL_SWIGLU_KERNEL_ATTRIBUTES
#endif

TESSEL_SWIGLU_KERNEL_ATTRIBUTES void forward_loop(const float* __restrict g, const float* __restrict u,
                                                  float* __restrict h, int64_t n) {
  for (int64_t i = 0; i < n; ++i) h[i] = g[i] * sigmoid_lanes(g[i]) * u[i];
}

TESSEL_SWIGLU_KERNEL_ATTRIBUTES void backward_loop(const float* __restrict g, const float* __restrict u,
                                                   const float* __restrict dh, float* __restrict dg,
                                                   float* __restrict du, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = sigmoid_lanes(g[i]);
    du[i] = dh[i] * (g[i] * s);
    dg[i] = dh[i] * u[i] * (s * (1.0f + g[i] * (1.0f - s)));
  }
}

TESSEL_SWIGLU_KERNEL_ATTRIBUTES void exp_loop(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_lanes(x[i]);
}

}  // namespace

void exp_fp32(const float* x, float* y, int64_t n) { exp_loop(x, y, n); }

void swiglu_forward_fp32(const float* g, const float* u, float* h, int64_t n) { forward_loop(g, u, h, n); }

void swiglu_backward_fp32(const float* g, const float* u, const float* dh, float* dg, float* du, int64_t n) {
  backward_loop(g, u, dh, dg, du, n);
}

}  // namespace tessel::nn
