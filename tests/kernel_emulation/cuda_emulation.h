// Just enough of CUDA for a host compiler to run tessel's kernels
// (src/nn/cuda/fused_kernels.cuh) on a machine without a GPU: each block's
// threads are real std::threads, and after each __syncthreads half the
// warps pause for a while (so a kernel that reads what another warp has not
// yet written, or overwrites what it has not yet read, gives a wrong result:
// RMSNorm without the first barrier of its block sum failed 4 runs of 4),
// blocks run one after another, __shared__ arrays
// are shared by the threads of the running block, __syncthreads is a
// barrier of the block, and a warp shuffle an exchange through memory
// between two barriers of its warp only.
// The storage types and their conversions are CUDA's own host code
// (cuda_bf16.h, cuda_fp16.h). What it cannot show: timing, occupancy,
// memory coalescing, and anything that depends on warps running in lockstep
// (the kernels assume none).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <barrier>
#include <cmath>
#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

// CUDA's qualifiers, as the host compiler should read them here. (CUDA's
// headers define some of them for host compilers already.)
#undef __global__
#undef __device__
#undef __forceinline__
#undef __shared__
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

namespace tessel::kernel_emulation {

struct Dim3 {
  unsigned int x = 0, y = 1, z = 1;
};

// The running block: its barrier, one barrier per warp (a shuffle
// synchronises its warp only, as on a GPU), exchange slots for shuffles,
// dynamic shared memory.
struct Block {
  std::unique_ptr<std::barrier<>> barrier;
  std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
  std::vector<float> exchange;
  std::vector<float> dynamic_shared;
};

// After __syncthreads some threads pause a little, at random: threads leave
// a barrier in no fixed order on a GPU either, and a pause while the others
// run on is what turns a missing barrier into a wrong result here.
void jitter();

inline Block& block() {
  static Block b;
  return b;
}

// Runs body() as `blocks` x `threads` threads, a block at a time.
void run_grid(unsigned int blocks, unsigned int threads, std::size_t shared_bytes,
              const std::function<void()>& body);

}  // namespace tessel::kernel_emulation

inline thread_local tessel::kernel_emulation::Dim3 threadIdx, blockIdx;
inline tessel::kernel_emulation::Dim3 blockDim, gridDim;

inline void __syncthreads() {
  tessel::kernel_emulation::block().barrier->arrive_and_wait();
  tessel::kernel_emulation::jitter();
}

// Every thread of a warp calls it together (as the kernels do), lane_mask
// below 32: the exchange stays inside the warp.
inline float __shfl_xor_sync(unsigned int /*mask*/, float v, int lane_mask) {
  auto& b = tessel::kernel_emulation::block();
  std::barrier<>& warp = *b.warp_barriers[threadIdx.x / 32];
  b.exchange[threadIdx.x] = v;
  warp.arrive_and_wait();
  const float other = b.exchange[threadIdx.x ^ static_cast<unsigned int>(lane_mask)];
  warp.arrive_and_wait();
  return other;
}

inline float rsqrtf(float v) { return 1.0f / std::sqrt(v); }
