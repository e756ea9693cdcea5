// e^x in float32 as straight-line arithmetic, for loops the compiler
// vectorises (nn/swiglu_kernel.cpp, loss/softmax_rows_kernel.cpp): 2^n · p(r)
// with n = round(x / ln 2) and p a polynomial on |r| <= ln 2 / 2 (Cephes'
// expf coefficients), within 2 ulp for x in [-87, 88] (clamped outside; NaN
// stays NaN; tests/nn/swiglu_test.cpp sweeps the range through
// nn::exp_fp32). Header-only and free of libtorch so that each kernel file
// inlines it under its own vectorisation flags (CMakeLists.txt).
#pragma once

#include <bit>
#include <cstdint>

namespace tessel::core {

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

}  // namespace tessel::core
