// The fp32 loops of the gated MLP's SiLU product h = silu(g) * u
// (nn/swiglu.h), forward and backward, each one pass over memory.
//
// Kept apart, free of libtorch headers, because it is compiled with its own
// flags (CMakeLists.txt, as optim/adamw_kernel.cpp): the exponential is a
// branch-free polynomial the compiler vectorises, with a copy for AVX2 + FMA
// chosen at load time; the ATen composition (silu, mul; silu_backward, two
// muls) makes six passes and keeps silu(g) for backward.
#pragma once

#include <cstdint>

namespace tessel::nn {

// y[i] = e^x[i] in float32 for x in [-87, 88] (clamped outside; NaN stays
// NaN), within 2 ulp of the exact value (1.01 at worst with FMA, 0.97
// without; tests/nn/swiglu_test.cpp sweeps the range): 2^n · p(r) with
// n = round(x / ln 2) and p a polynomial on |r| <= ln 2 / 2 (Cephes' expf
// coefficients). The code the loops below use, exposed to be tested.
void exp_fp32(const float* x, float* y, int64_t n);

// h[i] = g[i] · σ(g[i]) · u[i],  σ(x) = 1 / (1 + e^-x).
void swiglu_forward_fp32(const float* g, const float* u, float* h, int64_t n);

// From dh: du = dh · g σ(g),  dg = dh · u · σ(g) (1 + g (1 - σ(g))).
void swiglu_backward_fp32(const float* g, const float* u, const float* dh, float* dg, float* du, int64_t n);

}  // namespace tessel::nn
