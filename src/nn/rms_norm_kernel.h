// RMSNorm over the last dim of a contiguous float32 tensor as one autograd
// node with a hand-written backward, for RMSNorm::forward.
//
// Why: the ATen composition (square, mean, add, rsqrt, two multiplies)
// allocates five [rows, dim] temporaries in forward, autograd keeps several
// of them, and its backward runs about a dozen elementwise ops. Here forward
// is one read of x (sum of squares, in double) and one write of y per row,
// saving only x and the per-row 1/rms; backward is two passes:
//   x̂ = x * r,  y = x̂ * w'        (w' = w, or 1 + w when the weight is an offset: Gemma)
//   dx = r * (dy*w' - x̂ * mean(dy*w'*x̂)),   dw = Σ_rows dy * x̂
#pragma once

#include <ATen/core/Tensor.h>

namespace tessel::nn {

// True when rms_norm_fp32 takes these inputs (float32, x contiguous, weight
// [x.size(-1)] contiguous); RMSNorm uses the ATen composition otherwise.
bool rms_norm_fp32_applies(const at::Tensor& x, const at::Tensor& weight);

// y = x / sqrt(mean(x², last dim) + eps) * w'  (w' as above). Differentiable
// in x and weight.
at::Tensor rms_norm_fp32(const at::Tensor& x, const at::Tensor& weight, double eps, bool weight_is_offset);

}  // namespace tessel::nn
