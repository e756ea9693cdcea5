#include "optim/grad_norm.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "optim/sum_of_squares_kernel.h"

namespace tessel::optim {

namespace {
// Elements converted to fp64 at a time: 2 MiB on the CPU; 32 MiB on a
// device, where each chunk costs kernel launches (a billion parameters are
// ~300 chunks there, not ~5,000).
constexpr int64_t kHostFp64ChunkElements = int64_t{1} << 18;
constexpr int64_t kDeviceFp64ChunkElements = int64_t{1} << 22;
}  // namespace

double global_grad_norm(const std::vector<GradShardSet>& sets) {
  at::NoGradGuard no_grad;
  double total = 0.0;
  for (const GradShardSet& set : sets) {
    // Sum of squares in fp64 so that many small shards do not lose
    // precision: float32 CPU gradients in one read (sum_of_squares_kernel.h),
    // others converted a chunk at a time (never an fp64 copy of a whole
    // gradient, twice its size, only of one chunk).
    double local = 0.0;
    // The chunks' sums stay where the gradient is and are read once per set:
    // on a device each read is a host sync, which per chunk would stall the
    // launch queue thousands of times a step.
    at::Tensor chunk_sums;
    for (const at::Tensor& g : set.grads) {
      if (!g.defined() || g.numel() == 0) continue;
      if (g.scalar_type() == at::kFloat && g.device().is_cpu() && g.is_contiguous()) {
        local += sum_of_squares_fp32(g.data_ptr<float>(), g.numel());  // one read, no copy
        continue;
      }
      const at::Tensor flat = g.reshape({-1});
      const int64_t chunk = g.device().is_cpu() ? kHostFp64ChunkElements : kDeviceFp64ChunkElements;
      for (int64_t begin = 0; begin < flat.numel(); begin += chunk) {
        const at::Tensor c = flat.narrow(0, begin, std::min(chunk, flat.numel() - begin)).to(at::kDouble);
        const at::Tensor sum = at::dot(c, c);
        if (!chunk_sums.defined()) {
          chunk_sums = sum;
        } else {
          chunk_sums.add_(sum.to(chunk_sums.device()));
        }
      }
    }
    if (chunk_sums.defined()) local += chunk_sums.item<double>();
    at::Tensor sum_sq = at::full({1}, local, at::kDouble);
    for (const auto& group : set.sharded_over) {
      if (group && group->size() > 1) group->all_reduce(sum_sq, dist::ReduceOp::Sum);
    }
    total += sum_sq.item<double>();
  }
  return std::sqrt(total);
}

double clip_coefficient(double norm, double max_norm) {
  if (max_norm <= 0.0 || !(norm > max_norm)) return 1.0;
  return max_norm / (norm + 1e-6);
}

double clip_grad_norm(const std::vector<GradShardSet>& sets, double max_norm) {
  const double norm = global_grad_norm(sets);
  const double scale = clip_coefficient(norm, max_norm);
  if (scale == 1.0) return norm;
  at::NoGradGuard no_grad;
  for (const GradShardSet& set : sets) {
    for (const at::Tensor& g : set.grads) {
      if (g.defined()) g.mul_(scale);
    }
  }
  return norm;
}

}  // namespace tessel::optim
