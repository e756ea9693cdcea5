// nn/cuda/fused_kernels.h on a GPU: the kernels and launches of
// fused_kernels.cuh, with what that file asks of its includer done by CUDA
// itself (dynamic shared memory, <<<>>> launches, launch errors).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "nn/cuda/fused_kernels.cuh"

namespace tessel::nn::cuda_kernels {

__device__ float* dynamic_shared_floats() {
  extern __shared__ float tessel_dynamic_shared[];
  return tessel_dynamic_shared;
}

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), unsigned int blocks, size_t shared_bytes, void* stream, Args... args) {
  kernel<<<blocks, kThreads, shared_bytes, static_cast<cudaStream_t>(stream)>>>(args...);
}

void check_launch(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("tessel CUDA kernel ") + kernel + " failed to launch: " +
                             cudaGetErrorString(err));
}

}  // namespace tessel::nn::cuda_kernels
