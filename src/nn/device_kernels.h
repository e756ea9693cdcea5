// tessel's own CUDA kernels for the memory-bound pieces of a decoder layer:
// RMSNorm, the rotary embedding and the gated MLP's SiLU product, each one
// autograd node with a hand-written backward (issue 40's "what it takes to
// win"; the kernels: cuda/fused_kernels.cu).
//
// Why: on a GPU in bf16 these run as ATen compositions. RMSNorm alone is
// eight kernels forward (to float, square, mean, add, rsqrt, multiply, to
// bf16, multiply) and autograd keeps a float32 copy of its input; rotary is
// five temporaries of the heads' size; SiLU-times-up keeps silu(g). Here
// each is one pass over memory forward and one backward, keeping only the
// inputs (and RMSNorm's per-row 1/rms). Arithmetic is float32 on float32,
// bfloat16 or float16 storage, rounding intermediates where the composition
// does, so bf16 results follow it (docs/gpu.md).
//
// Off by default until measured on a GPU: TESSEL_DEVICE_KERNELS=fused turns
// them on (default `aten`: the compositions; core/device_kernel_choice.h). Where a kernel does not take
// its inputs (CPU tensors, other dtypes, strides, RMSNorm rows wider than
// device_rms_norm_max_dim()) the caller keeps the composition.
#pragma once

#include <ATen/core/Tensor.h>

namespace tessel::nn {

// TESSEL_DEVICE_KERNELS (core/device_kernel_choice.h) for this build's
// kernels: true for `fused`, a UsageError for `fused` without them.
bool device_kernels_enabled();

// Whether the kernels take these inputs (CUDA tensors of one device and
// dtype: float32, bfloat16 or float16; the shapes below). They do not look
// at the switch above.
bool rms_norm_device_applies(const at::Tensor& x, const at::Tensor& weight);
bool rotary_device_applies(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
bool swiglu_device_applies(const at::Tensor& g, const at::Tensor& u);

// x / sqrt(mean(x², last dim) + eps) * w (or * (1 + w): weight_is_offset,
// Gemma); x contiguous, weight [x.size(-1)]. Differentiable in x and weight.
at::Tensor rms_norm_device(const at::Tensor& x, const at::Tensor& weight, double eps, bool weight_is_offset);

// x * cos + rotate_half(x) * sin for x [B, heads, T, D] (unit stride in D),
// cos/sin contiguous [B, T, D] or [T, D]; contiguous result. Differentiable in x.
at::Tensor rotary_device(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// silu(g) * u for contiguous g, u of one shape. Differentiable in both.
at::Tensor swiglu_device(const at::Tensor& g, const at::Tensor& u);

}  // namespace tessel::nn
