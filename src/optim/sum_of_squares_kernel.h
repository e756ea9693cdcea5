// The sum of squares of a float32 gradient, for the global gradient norm
// (grad_norm.h), in one read of the values and no copy.
//
// Each square is exact in float64 (two 24-bit significands multiply into at
// most 48 bits), so the sum is float64 arithmetic on the exact squares, as
// when the gradient is first converted to float64, which the ATen path does
// a chunk at a time (a 2 MiB float64 copy written and read again per 256K
// values: ~20 ms per step for bench-medium's 31.6M parameters, with the
// clip's scaling). Eight float64 lanes, added together at the end: the order
// of the additions differs from a dot product's, within float64 rounding.
//
// Kept apart from grad_norm.cpp and free of libtorch headers, as the other
// *_kernel files: its loop carries its own vectorisation attributes, and it
// skips the shared precompiled header (CMakeLists.txt).
#pragma once

#include <cstdint>

namespace tessel::optim {

// x[0]^2 + ... + x[n-1]^2 in float64; n >= 0.
double sum_of_squares_fp32(const float* x, int64_t n);

}  // namespace tessel::optim
