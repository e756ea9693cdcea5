// The fp32 AdamW update of one contiguous run of elements, in one pass over
// memory: each element's parameter, gradient and two moments are read once
// and written once (the ATen sequence in adamw.cpp makes eight passes).
//
// Kept apart from adamw.cpp, and free of libtorch headers, because it is
// compiled with its own flags (CMakeLists.txt): -fno-math-errno, without
// which GCC keeps std::sqrt a scalar library call that may set errno and so
// cannot vectorise the loop. Compiled the default way this loop ran scalar
// (one element per instruction): 106 ms for bench-medium's 31.6M parameters,
// against 20-28 ms vectorised (docs/bench/vs_pytorch.md).
#pragma once

#include <cstdint>

namespace tessel::optim {

// The update's constants in fp32, computed once per step.
struct AdamWCoefficients {
  float decay;          // 1 - lr * weight_decay
  float one_minus_b1;   // lerp weight
  float b2, one_minus_b2;
  float bc2_sqrt;       // sqrt(1 - beta2^t)
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^t)
  float grad_scale;     // each gradient times this as it is read (clipping); 1: none
};

// p, g, m, v: n elements each, not overlapping. The same operations per
// element in the same order as the ATen path (the gradient's scaling, lerp as
// m + w (g - m), then addcmul, sqrt, addcdiv), each correctly rounded, so
// every instruction set the loop is compiled for gives the same bits.
void adamw_update_fp32(float* p, const float* g, float* m, float* v, int64_t n,
                       const AdamWCoefficients& c);

}  // namespace tessel::optim
