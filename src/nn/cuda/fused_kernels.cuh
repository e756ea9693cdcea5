// nn/cuda/fused_kernels.h's kernels and their launches, written once for two
// includers: fused_kernels.cu (nvcc, a GPU) and tests/kernel_emulation/
// (a host compiler, CUDA's few built-ins emulated by threads, so that the
// kernels' indexing, reductions and formulas are checked on machines
// without a GPU). The includer provides, before including this file, the
// CUDA types and built-ins (cuda_bf16.h, cuda_fp16.h, threadIdx, ...), and
// after it defines the three declarations at the top of the namespace.
// Included by one translation unit per program.
//
// One pass over memory per forward and per backward, float32 arithmetic on
// any of the three storage types, and where the ATen composition rounds an
// intermediate to the storage type (bf16: silu before the product, rotary's
// two products before their sum, RMSNorm's normalised row before the
// weight) the same rounding here, so bf16 outputs follow the composition's
// and not a more precise formula the rest of the model never saw.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "nn/cuda/fused_kernels.h"

namespace tessel::nn::cuda_kernels {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
// Grid-stride loops: enough blocks to fill any current GPU, no more.
constexpr int64_t kMaxBlocks = 65535;

// The block's dynamic shared memory (the launch sizes it).
__device__ float* dynamic_shared_floats();

// Runs kernel(args...) on `blocks` blocks of kThreads threads with
// `shared_bytes` of dynamic shared memory, on `stream` (a cudaStream_t).
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), unsigned int blocks, size_t shared_bytes, void* stream, Args... args);

// Throws std::runtime_error naming `kernel` if its launch failed.
void check_launch(const char* kernel);

namespace {

template <typename T>
__device__ __forceinline__ float load(const T* p, int64_t i);
template <>
__device__ __forceinline__ float load<float>(const float* p, int64_t i) { return p[i]; }
template <>
__device__ __forceinline__ float load<__nv_bfloat16>(const __nv_bfloat16* p, int64_t i) {
  return __bfloat162float(p[i]);
}
template <>
__device__ __forceinline__ float load<__half>(const __half* p, int64_t i) { return __half2float(p[i]); }

template <typename T>
__device__ __forceinline__ T store_as(float v);
template <>
__device__ __forceinline__ float store_as<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 store_as<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <>
__device__ __forceinline__ __half store_as<__half>(float v) { return __float2half(v); }

// v as a tensor of storage type T would hold it (round to nearest even).
template <typename T>
__device__ __forceinline__ float rounded(float v) {
  const T r = store_as<T>(v);
  return load<T>(&r, 0);
}

// The sum of v over the block, in every thread (same order everywhere, so
// every thread gets the same float). `scratch` holds kWarps floats.
__device__ inline float block_sum(float v, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  __syncthreads();  // the previous call's readers are done with scratch
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0;
  for (int w = 0; w < kWarps; ++w) total += scratch[w];
  return total;
}

template <typename T>
__global__ void rms_norm_forward_kernel(const T* x, const T* w, T* y, float* rstd, int64_t rows, int dim,
                                        float eps, bool offset) {
  __shared__ float scratch[kWarps];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * dim;
    float squares = 0;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
      const float v = load(xr, j);
      squares += v * v;
    }
    const float rs = rsqrtf(block_sum(squares, scratch) / dim + eps);
    if (threadIdx.x == 0) rstd[r] = rs;
    T* yr = y + r * dim;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
      const float normed = load(xr, j) * rs;
      yr[j] = store_as<T>(offset ? normed * (load(w, j) + 1.0f) : load(w, j) * rounded<T>(normed));
    }
  }
}

// One block per group of rows (grid-stride); each thread owns the columns
// j ≡ threadIdx.x (mod blockDim.x) of the block's dw accumulator in shared
// memory, so no two threads touch one column.
template <typename T>
__global__ void rms_norm_backward_kernel(const T* x, const T* w, const float* rstd, const T* dy, T* dx,
                                         float* dw_partial, int64_t rows, int dim, bool offset) {
  float* dw = dynamic_shared_floats();
  __shared__ float scratch[kWarps];
  for (int j = threadIdx.x; j < dim; j += blockDim.x) dw[j] = 0;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * dim;
    const T* dyr = dy + r * dim;
    const float rs = rstd[r];
    float dot = 0;  // Σ dy * w' * x̂ over the row
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
      const float normed = load(xr, j) * rs, g = load(dyr, j);
      const float weight = offset ? load(w, j) + 1.0f : load(w, j);
      dot += g * weight * normed;
      dw[j] += g * (offset ? normed : rounded<T>(normed));
    }
    const float mean = block_sum(dot, scratch) / dim;
    T* dxr = dx + r * dim;
    for (int j = threadIdx.x; j < dim; j += blockDim.x) {
      const float normed = load(xr, j) * rs;
      const float weight = offset ? load(w, j) + 1.0f : load(w, j);
      dxr[j] = store_as<T>(rs * (load(dyr, j) * weight - normed * mean));
    }
  }
  for (int j = threadIdx.x; j < dim; j += blockDim.x) dw_partial[blockIdx.x * static_cast<int64_t>(dim) + j] = dw[j];
}

template <typename T, bool Inverse>
__global__ void rotary_kernel(const T* x, const T* cos, const T* sin, T* y, RotaryShape s) {
  const int64_t half = s.head_dim / 2;
  const int64_t n = s.batch * s.heads * s.tokens * half;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = i % half;
    int64_t row = i / half;
    const int64_t t = row % s.tokens;
    row /= s.tokens;
    const int64_t h = row % s.heads, b = row / s.heads;
    const T* xr = x + b * s.stride_batch + h * s.stride_head + t * s.stride_token;
    const int64_t angle = b * s.cos_batch_stride + t * s.head_dim;
    T* yr = y + ((b * s.heads + h) * s.tokens + t) * s.head_dim;
    const float x1 = load(xr, k), x2 = load(xr, k + half);
    const float c1 = load(cos, angle + k), c2 = load(cos, angle + k + half);
    const float s1 = load(sin, angle + k), s2 = load(sin, angle + k + half);
    if (Inverse) {  // dx1 = dy1 c1 + dy2 s2,  dx2 = dy2 c2 - dy1 s1
      yr[k] = store_as<T>(x1 * c1 + x2 * s2);
      yr[k + half] = store_as<T>(x2 * c2 - x1 * s1);
    } else {  // y1 = x1 c1 - x2 s1,  y2 = x2 c2 + x1 s2
      yr[k] = store_as<T>(rounded<T>(x1 * c1) - rounded<T>(x2 * s1));
      yr[k + half] = store_as<T>(rounded<T>(x2 * c2) + rounded<T>(x1 * s2));
    }
  }
}

// σ(g) as ATen's CUDA silu forms silu: g / (1 + e^-g) with the accurate expf.
__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

template <typename T>
__global__ void swiglu_forward_kernel(const T* g, const T* u, T* h, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gv = load(g, i);
    h[i] = store_as<T>(rounded<T>(gv / (1.0f + expf(-gv))) * load(u, i));
  }
}

template <typename T>
__global__ void swiglu_backward_kernel(const T* g, const T* u, const T* dh, T* dg, T* du, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gv = load(g, i), uv = load(u, i), d = load(dh, i);
    const float sig = sigmoid(gv);
    du[i] = store_as<T>(d * gv * sig);
    dg[i] = store_as<T>(d * uv * sig * (1.0f + gv * (1.0f - sig)));
  }
}

unsigned int elementwise_blocks(int64_t n) {
  return static_cast<unsigned int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

// Calls f with a null pointer of the storage type, to pick the template.
template <typename F>
void with_storage(Storage s, F&& f) {
  switch (s) {
    case Storage::Float32: f(static_cast<float*>(nullptr)); return;
    case Storage::BFloat16: f(static_cast<__nv_bfloat16*>(nullptr)); return;
    case Storage::Float16: f(static_cast<__half*>(nullptr)); return;
  }
  throw std::runtime_error("tessel CUDA kernels: unknown storage type");
}

}  // namespace

void rms_norm_forward(Storage s, const void* x, const void* w, void* y, float* rstd, int64_t rows,
                      int64_t dim, float eps, bool offset, void* stream) {
  if (rows == 0) return;
  with_storage(s, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const auto blocks = static_cast<unsigned int>(std::min(rows, kMaxBlocks));
    launch(rms_norm_forward_kernel<T>, blocks, 0, stream, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(y), rstd, rows,
        static_cast<int>(dim), eps, offset);
  });
  check_launch("rms_norm_forward");
}

void rms_norm_backward(Storage s, const void* x, const void* w, const float* rstd, const void* dy, void* dx,
                       float* dw_partial, int64_t blocks, int64_t rows, int64_t dim, bool offset, void* stream) {
  if (dim > kMaxRmsNormDim) throw std::runtime_error("tessel CUDA rms_norm_backward: row wider than kMaxRmsNormDim");
  with_storage(s, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch(rms_norm_backward_kernel<T>, static_cast<unsigned int>(blocks), dim * sizeof(float), stream,
           static_cast<const T*>(x), static_cast<const T*>(w), rstd, static_cast<const T*>(dy), static_cast<T*>(dx),
        dw_partial, rows, static_cast<int>(dim), offset);
  });
  check_launch("rms_norm_backward");
}

void rotary(Storage s, const void* x, const void* cos, const void* sin, void* y, const RotaryShape& shape,
            bool inverse, void* stream) {
  const int64_t n = shape.batch * shape.heads * shape.tokens * (shape.head_dim / 2);
  if (n == 0) return;
  with_storage(s, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    auto* kernel = inverse ? rotary_kernel<T, true> : rotary_kernel<T, false>;
    launch(kernel, elementwise_blocks(n), 0, stream, static_cast<const T*>(x), static_cast<const T*>(cos), static_cast<const T*>(sin), static_cast<T*>(y), shape);
  });
  check_launch(inverse ? "rotary_backward" : "rotary_forward");
}

void swiglu_forward(Storage s, const void* g, const void* u, void* h, int64_t n, void* stream) {
  if (n == 0) return;
  with_storage(s, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch(swiglu_forward_kernel<T>, elementwise_blocks(n), 0, stream, static_cast<const T*>(g), static_cast<const T*>(u), static_cast<T*>(h), n);
  });
  check_launch("swiglu_forward");
}

void swiglu_backward(Storage s, const void* g, const void* u, const void* dh, void* dg, void* du, int64_t n,
                     void* stream) {
  if (n == 0) return;
  with_storage(s, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch(swiglu_backward_kernel<T>, elementwise_blocks(n), 0, stream, static_cast<const T*>(g), static_cast<const T*>(u), static_cast<const T*>(dh), static_cast<T*>(dg),
        static_cast<T*>(du), n);
  });
  check_launch("swiglu_backward");
}

}  // namespace tessel::nn::cuda_kernels
