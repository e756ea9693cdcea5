// src/nn/cuda/fused_kernels.cuh compiled by the host compiler over the
// emulation (cuda_emulation.h): nn/cuda/fused_kernels.h's functions, run on
// host memory by threads.
#include "kernel_emulation/cuda_emulation.h"
// (after the emulation: it defines what the kernels' file expects)
#include "nn/cuda/fused_kernels.cuh"

#include <stdexcept>
#include <string>

namespace tessel::kernel_emulation {

void run_grid(unsigned int blocks, unsigned int threads, std::size_t shared_bytes,
              const std::function<void()>& body) {
  if (threads % 32 != 0) throw std::runtime_error("emulated launch: threads must be whole warps");
  Block& b = block();
  gridDim = Dim3{blocks};
  blockDim = Dim3{threads};
  for (unsigned int block_index = 0; block_index < blocks; ++block_index) {
    b.barrier = std::make_unique<std::barrier<>>(threads);
    b.exchange.assign(threads, 0.0f);
    // Dynamic shared memory starts as garbage on a GPU: NaNs here, so a
    // kernel that reads before it writes shows it.
    b.dynamic_shared.assign(shared_bytes / sizeof(float), std::nanf(""));
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t, block_index] {
        threadIdx = Dim3{t};
        blockIdx = Dim3{block_index};
        body();
      });
    }
    for (auto& th : pool) th.join();
  }
}

}  // namespace tessel::kernel_emulation

namespace tessel::nn::cuda_kernels {

float* dynamic_shared_floats() { return kernel_emulation::block().dynamic_shared.data(); }

template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), unsigned int blocks, size_t shared_bytes, void* /*stream*/, Args... args) {
  kernel_emulation::run_grid(blocks, kThreads, shared_bytes, [&] { kernel(args...); });
}

void check_launch(const char*) {}

}  // namespace tessel::nn::cuda_kernels
