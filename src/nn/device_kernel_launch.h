// Launching nn/device_kernels.h's CUDA kernels on tensors: the layer between
// the autograd nodes (device_kernels.cpp, built everywhere) and the kernels
// (cuda/fused_kernels.cu). The CUDA build takes cuda/device_kernel_launch.cpp
// (current stream, storage type, shapes); a CPU build links
// device_kernel_launch_absent.cpp, where nothing is built and every launch
// throws. Callers check the shapes (device_kernels.cpp's *_applies); outputs
// are allocated by the caller, contiguous.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace tessel::nn {

// Whether this build has the CUDA kernels.
bool device_kernels_built();

// The widest row the RMSNorm kernels take (its backward keeps a float per
// column in shared memory); wider rows use the ATen composition.
int64_t device_rms_norm_max_dim();

// y and rstd (float32, one per row) from x and weight.
void launch_rms_norm_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& y,
                             const at::Tensor& rstd, double eps, bool weight_is_offset);

// How many [dim] float32 partial sums of the weight's gradient the backward
// writes for input x (the caller allocates [that, dim] and sums them).
int64_t rms_norm_backward_partials(const at::Tensor& x);

void launch_rms_norm_backward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& rstd,
                              const at::Tensor& dy, const at::Tensor& dx, const at::Tensor& dw_partial,
                              bool weight_is_offset);

// y (contiguous [B, H, T, D]) = rotary of x; inverse: the backward.
void launch_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& y,
                   bool inverse);

void launch_swiglu_forward(const at::Tensor& g, const at::Tensor& u, const at::Tensor& h);
void launch_swiglu_backward(const at::Tensor& g, const at::Tensor& u, const at::Tensor& dh, const at::Tensor& dg,
                            const at::Tensor& du);

}  // namespace tessel::nn
