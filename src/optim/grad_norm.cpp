#include "optim/grad_norm.h"

#include <ATen/ATen.h>

#include <cmath>

namespace tessel::optim {

double global_grad_norm(const std::vector<GradShardSet>& sets) {
  at::NoGradGuard no_grad;
  double total = 0.0;
  for (const GradShardSet& set : sets) {
    // Sum of squares in fp64 so that many small shards do not lose precision.
    at::Tensor sum_sq = at::zeros({1}, at::kDouble);
    for (const at::Tensor& g : set.grads) {
      if (!g.defined() || g.numel() == 0) continue;
      sum_sq += g.to(at::kDouble).pow(2).sum();
    }
    for (const auto& group : set.sharded_over) {
      if (group && group->size() > 1) group->all_reduce(sum_sq, dist::ReduceOp::Sum);
    }
    total += sum_sq.item<double>();
  }
  return std::sqrt(total);
}

double clip_grad_norm(const std::vector<GradShardSet>& sets, double max_norm) {
  const double norm = global_grad_norm(sets);
  if (max_norm <= 0.0 || !(norm > max_norm)) return norm;
  const double scale = max_norm / (norm + 1e-6);
  at::NoGradGuard no_grad;
  for (const GradShardSet& set : sets) {
    for (const at::Tensor& g : set.grads) {
      if (g.defined()) g.mul_(scale);
    }
  }
  return norm;
}

}  // namespace tessel::optim
