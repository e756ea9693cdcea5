// y = x · wᵀ (+ bias) for Linear: one autograd node whose products run
// through oneDNN's sgemm (nn/onednn_sgemm.h) where that is preferred and the
// tensors are float32 on the CPU; at::linear otherwise.
//
// The node's backward computes what at::linear's does (dx = dy · w,
// dw = dyᵀ · x, dbias = Σ dy), each only when its input needs a gradient,
// and keeps the same two tensors (x and w) for it.
#pragma once

#include <ATen/core/Tensor.h>

namespace tessel::nn {

// x [..., in], weight [out, in], bias [out] or undefined -> [..., out]:
// onednn_linear where onednn_sgemm_preferred() and onednn_linear_applies,
// else at::linear.
at::Tensor linear_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// True when onednn_linear takes these: oneDNN's sgemm found, float32 CPU
// tensors of matching sizes, none empty.
bool onednn_linear_applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// The oneDNN node itself, whatever TESSEL_GEMM and the CPU say.
at::Tensor onednn_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace tessel::nn
