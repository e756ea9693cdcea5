// src/nn/cuda/fused_kernels.cuh compiled by the host compiler over the
// emulation (cuda_emulation.h): nn/cuda/fused_kernels.h's functions, run on
// host memory by threads.
#include "kernel_emulation/cuda_emulation.h"
// (after the emulation: it defines what the kernels' file expects)
#include "nn/cuda/fused_kernels.cuh"

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>

namespace tessel::kernel_emulation {

void jitter() {
  // Whole warps pause, half of them at each crossing, for 0.5-3 ms (long
  // next to the others' run to their next write, on few cores shared by
  // 256 threads): a race needs one warp to run ahead while another lags (a
  // pause of single threads holds every warp back alike). The same draw in
  // every thread of a warp: a hash of the block, the warp and how many
  // barriers this thread has crossed (the same count across the warp).
  thread_local uint64_t crossings = 0;
  uint64_t h = (static_cast<uint64_t>(blockIdx.x) << 40) ^ (static_cast<uint64_t>(threadIdx.x / 32) << 24) ^ ++crossings;
  h ^= h >> 33;  // splitmix64's finaliser
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  if (h % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(500 + (h >> 8) % 2500));
}

void run_grid(unsigned int blocks, unsigned int threads, std::size_t shared_bytes,
              const std::function<void()>& body) {
  if (threads % 32 != 0) throw std::runtime_error("emulated launch: threads must be whole warps");
  Block& b = block();
  gridDim = Dim3{blocks};
  blockDim = Dim3{threads};
  for (unsigned int block_index = 0; block_index < blocks; ++block_index) {
    b.barrier = std::make_unique<std::barrier<>>(threads);
    b.warp_barriers.clear();
    for (unsigned int w = 0; w < threads / 32; ++w) b.warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
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
