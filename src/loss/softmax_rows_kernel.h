// The fp32 row loops of the chunked softmax cross-entropy
// (loss/chunked_softmax.h): each reads a row of logits once, where the ATen
// composition made a pass per operation over a 4 MiB block that no cache
// holds (max; subtract, exponentiate, sum; subtract, exponentiate, scatter,
// scale), each a trip to memory.
//
// Kept apart, free of libtorch headers, because it is compiled with its own
// flags (CMakeLists.txt, as nn/swiglu_kernel.cpp): the exponential is
// core/exp_lanes.h, vectorised, with a copy for AVX2 + FMA chosen at load
// time. Rows are contiguous, `n` floats each.
#pragma once

#include <cstdint>

namespace tessel::loss {

// out[r] = max_j x[r, j]; with a NaN in the row, some value of the row or
// NaN (the sum of exponentials shifted by it is NaN either way). n >= 1.
void row_max_fp32(const float* x, int64_t rows, int64_t n, float* out);

// out[r] = Σ_j e^(x[r, j] - shift[r]), the terms summed in float32 a block
// of 256 at a time (16 running sums each) and the blocks in float64.
void row_sum_exp_fp32(const float* x, const float* shift, int64_t rows, int64_t n, float* out);

// grad[r, j] = scale[r] · (e^(x[r, j] - lse[r]) - [j == column[r] and take[r]]).
void softmax_cross_entropy_grad_fp32(const float* x, const float* lse, const int64_t* column, const bool* take,
                                     const float* scale, int64_t rows, int64_t n, float* grad);

}  // namespace tessel::loss
