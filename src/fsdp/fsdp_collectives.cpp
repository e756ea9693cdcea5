#include "fsdp/fsdp_collectives.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"

namespace tessel::fsdp {

void pack_for_reduce_scatter(const std::vector<FSDPParam*>& params, const std::vector<at::Tensor>& grads,
                             int world, int64_t local_numel, const at::Tensor& packed_flat) {
  at::NoGradGuard no_grad;
  TESSEL_CHECK(params.size() == grads.size(), "FSDP: {} params but {} grads", params.size(),
               grads.size());
  TESSEL_CHECK(packed_flat.numel() == world * local_numel, "FSDP: packed buffer of {} elements, expected {}",
               packed_flat.numel(), world * local_numel);
  at::Tensor packed = packed_flat.view({world, local_numel});
  // Each rank's row is the parameters' shards in offset order; only what no
  // gradient row covers (shard padding, parameters without a gradient, the
  // tail) is zeroed, so the reduce-scatter sums zeros there without the whole
  // buffer being written twice.
  std::vector<size_t> order(params.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return params[a]->shard_offset() < params[b]->shard_offset(); });
  std::vector<at::Tensor> rows(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const FSDPParam& p = *params[i];
    if (!grads[i].defined()) continue;
    TESSEL_CHECK(grads[i].numel() == p.numel(),
                 "FSDP: gradient of '{}' has {} elements, expected {}", p.fqn(), grads[i].numel(),
                 p.numel());
    rows[i] = grads[i].reshape({p.dim0(), p.row_numel()});
  }
  for (int r = 0; r < world; ++r) {
    at::Tensor row = packed[r];
    int64_t written_to = 0;  // everything before it is a gradient or zeroed
    for (size_t i : order) {
      const FSDPParam& p = *params[i];
      if (!rows[i].defined()) continue;
      const int64_t begin = std::min(p.dim0(), r * p.padded_rows());
      const int64_t count = std::min(p.dim0(), begin + p.padded_rows()) - begin;
      if (count <= 0) continue;
      if (p.shard_offset() > written_to) row.narrow(0, written_to, p.shard_offset() - written_to).zero_();
      row.narrow(0, p.shard_offset(), count * p.row_numel())
          .view({count, p.row_numel()})
          .copy_(rows[i].narrow(0, begin, count));
      written_to = p.shard_offset() + count * p.row_numel();
    }
    if (local_numel > written_to) row.narrow(0, written_to, local_numel - written_to).zero_();
  }
}

at::Tensor shard_view(const FSDPParam& param, const at::Tensor& local_buffer) {
  return local_buffer.narrow(0, param.shard_offset(), param.local_rows() * param.row_numel())
      .view(param.sharded_shape());
}

}  // namespace tessel::fsdp
