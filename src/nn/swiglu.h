// The gated MLP's SiLU product h = silu(g) * u as one autograd node on
// contiguous float32 tensors, for GatedMLP::forward (the loops:
// nn/swiglu_kernel.h).
//
// Why: the ATen composition runs silu, a multiply and, in backward,
// silu_backward and two multiplies, six passes over [tokens, intermediate]
// tensors, and autograd keeps silu(g) besides g and u. Here forward is one
// pass and backward one, and only g and u are kept (σ(g) is recomputed).
#pragma once

#include <ATen/core/Tensor.h>

namespace tessel::nn {

// True when swiglu_fp32 takes these (float32, contiguous, same shape, CPU);
// GatedMLP uses the ATen composition otherwise.
bool swiglu_fp32_applies(const at::Tensor& g, const at::Tensor& u);

// silu(g) * u, differentiable in g and u.
at::Tensor swiglu_fp32(const at::Tensor& g, const at::Tensor& u);

}  // namespace tessel::nn
