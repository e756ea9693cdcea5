// The CUDA kernels behind nn/device_kernels.h, on raw pointers: RMSNorm,
// rotary embedding and the SiLU product, forward and backward, for float32,
// bfloat16 and float16 storage with float32 arithmetic.
//
// Kept free of libtorch headers so that nvcc compiles only this folder's
// .cu file (fast, and no ATen template soup through nvcc); the tensors are
// unpacked by nn/cuda/device_kernel_launch.cpp. Each function launches on
// `stream` (a cudaStream_t) and throws std::runtime_error naming the kernel
// when the launch fails.
#pragma once

#include <cstdint>

namespace tessel::nn::cuda_kernels {

enum class Storage { Float32, BFloat16, Float16 };

// The widest row RMSNorm's backward takes: its weight-gradient accumulator
// is one float per column in a block's shared memory (40 KiB).
constexpr int64_t kMaxRmsNormDim = 10240;

// y = x * r * w  (Llama: w times x*r rounded to the storage type, as HF's
// `w * normed.to(dtype)`) or x * r * (1 + w) (offset: Gemma), r = 1/sqrt(mean(x²) + eps)
// per row of `dim`, saved in rstd (float32, one per row).
void rms_norm_forward(Storage s, const void* x, const void* w, void* y, float* rstd, int64_t rows,
                      int64_t dim, float eps, bool offset, void* stream);

// dx (storage type) and per-block partial sums of dw, dw_partial
// [blocks, dim] float32 (the caller sums them over blocks).
void rms_norm_backward(Storage s, const void* x, const void* w, const float* rstd, const void* dy, void* dx,
                       float* dw_partial, int64_t blocks, int64_t rows, int64_t dim, bool offset, void* stream);

// x [B, H, T, D] with unit stride in D (strides in elements), cos/sin
// [B, T, D] (cos_batch_stride = T*D) or [T, D] (0). y contiguous [B, H, T, D].
struct RotaryShape {
  int64_t batch, heads, tokens, head_dim;
  int64_t stride_batch, stride_head, stride_token;
  int64_t cos_batch_stride;
};

// inverse = false: y = x*cos + rotate_half(x)*sin, each product rounded to
// the storage type before the sum (as the ATen composition does); inverse
// = true: the backward, dx from dy (the rotation by minus the angle).
void rotary(Storage s, const void* x, const void* cos, const void* sin, void* y, const RotaryShape& shape,
            bool inverse, void* stream);

// h = silu(g) * u, silu rounded to the storage type first (as at::silu then a multiply).
void swiglu_forward(Storage s, const void* g, const void* u, void* h, int64_t n, void* stream);

// dg = dh * u * σ(g) * (1 + g (1 - σ(g))),  du = dh * g σ(g).
void swiglu_backward(Storage s, const void* g, const void* u, const void* dh, void* dg, void* du, int64_t n,
                     void* stream);

}  // namespace tessel::nn::cuda_kernels
