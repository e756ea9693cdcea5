// nn/device_kernel_launch.h in the CUDA build: each launch on the current
// CUDA stream of the tensors' device (the compute stream the collectives
// order themselves against: docs/gpu.md), so the kernels take their place
// in the stream order like any ATen op.
#include "nn/device_kernel_launch.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>

#include "core/error.h"
#include "nn/cuda/fused_kernels.h"

namespace tessel::nn {

namespace {

namespace k = cuda_kernels;

k::Storage storage_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return k::Storage::Float32;
    case at::kBFloat16: return k::Storage::BFloat16;
    case at::kHalf: return k::Storage::Float16;
    default:
      throw Error(fmt::format("tessel CUDA kernels take float32, bfloat16 or float16, got {}",
                              c10::toString(t.scalar_type())));
  }
}

void* stream_of(const at::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }

}  // namespace

bool device_kernels_built() { return true; }

int64_t device_rms_norm_max_dim() { return k::kMaxRmsNormDim; }

void launch_rms_norm_forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& y,
                             const at::Tensor& rstd, double eps, bool weight_is_offset) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t dim = x.size(-1);
  k::rms_norm_forward(storage_of(x), x.data_ptr(), weight.data_ptr(), y.data_ptr(), rstd.data_ptr<float>(),
                      x.numel() / dim, dim, static_cast<float>(eps), weight_is_offset, stream_of(x));
}

int64_t rms_norm_backward_partials(const at::Tensor& x) {
  // Four blocks of 256 threads per multiprocessor (half its threads) to
  // hide memory latency; each block sums its own rows' share of the
  // weight's gradient, and the [blocks, dim] partials cost one small sum.
  int sms = 0;
  TESSEL_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.device().index()) ==
                   cudaSuccess,
               "cannot read the CUDA device's multiprocessor count");
  return std::clamp<int64_t>(x.numel() / x.size(-1), 1, 4 * sms);
}

void launch_rms_norm_backward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& rstd,
                              const at::Tensor& dy, const at::Tensor& dx, const at::Tensor& dw_partial,
                              bool weight_is_offset) {
  const c10::cuda::CUDAGuard guard(x.device());
  const int64_t dim = x.size(-1);
  k::rms_norm_backward(storage_of(x), x.data_ptr(), weight.data_ptr(), rstd.data_ptr<float>(), dy.data_ptr(),
                       dx.data_ptr(), dw_partial.data_ptr<float>(), dw_partial.size(0), x.numel() / dim, dim,
                       weight_is_offset, stream_of(x));
}

void launch_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& y,
                   bool inverse) {
  const c10::cuda::CUDAGuard guard(x.device());
  const k::RotaryShape shape{x.size(0),   x.size(1),   x.size(2),
                             x.size(3),   x.stride(0), x.stride(1),
                             x.stride(2), cos.dim() == 3 ? cos.stride(0) : 0};
  k::rotary(storage_of(x), x.data_ptr(), cos.data_ptr(), sin.data_ptr(), y.data_ptr(), shape, inverse,
            stream_of(x));
}

void launch_swiglu_forward(const at::Tensor& g, const at::Tensor& u, const at::Tensor& h) {
  const c10::cuda::CUDAGuard guard(g.device());
  k::swiglu_forward(storage_of(g), g.data_ptr(), u.data_ptr(), h.data_ptr(), g.numel(), stream_of(g));
}

void launch_swiglu_backward(const at::Tensor& g, const at::Tensor& u, const at::Tensor& dh, const at::Tensor& dg,
                            const at::Tensor& du) {
  const c10::cuda::CUDAGuard guard(g.device());
  k::swiglu_backward(storage_of(g), g.data_ptr(), u.data_ptr(), dh.data_ptr(), dg.data_ptr(), du.data_ptr(),
                     g.numel(), stream_of(g));
}

}  // namespace tessel::nn
