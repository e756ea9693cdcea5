// Autograd-aware collectives for tensor parallelism, each over one group (the
// tp group, usually). Forward moves data; backward runs the collective that
// makes each rank's input gradient right, given how the output's gradient
// arrives on each rank. Two kinds of output gradient exist:
//   replicated  every rank holds the same, full gradient (the output feeds
//               computation that every rank repeats identically);
//   partial     each rank holds its own contribution and the true gradient is
//               their sum (the output feeds sharded computation, e.g. a
//               column-parallel Linear whose input gradient is a partial sum).
// and gradients of Replicate/Partial inputs are returned replicated (every rank
// gets the full gradient), gradients of shards as this rank's shard.
//
// Shards follow torch.chunk sizes (chunking.h): trailing ranks may hold short
// or empty chunks. Functions that receive shards take `sizes`, every rank's
// extent along the dim (e.g. chunk_sizes(global, group->size())), because a
// rank cannot infer the others' sizes from its own.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "dist/communicator.h"

namespace tessel::tensor {

// Megatron "f": identity forward; backward all-reduces (SUM) the partial input
// gradients into the full one. Put it where a replicated activation enters
// sharded computation (before a column-parallel Linear).
at::Tensor copy_to_group(const at::Tensor& x, const dist::CommunicatorPtr& group);

// Megatron "g": forward all-reduces (SUM) partial results; backward is the
// identity (the output gradient is replicated). Ends a row-parallel Linear.
at::Tensor reduce_from_group(const at::Tensor& x, const dist::CommunicatorPtr& group);

// All-gather of shards along dim (Shard -> Replicate) whose output gradient is
// REPLICATED: backward takes this rank's chunk of it, no communication. Right
// when the gathered output is consumed by replicated computation, e.g.
// colwise_rep / gather_output (the logits or activations every rank uses whole).
at::Tensor all_gather_along(const at::Tensor& x, int64_t dim, const dist::CommunicatorPtr& group,
                            const std::vector<int64_t>& sizes);

// All-gather of shards along dim whose output gradient is PARTIAL: backward
// reduce-scatters it (sum of every rank's contribution, then this rank's
// chunk). Right when the gathered output feeds sharded computation, e.g. the
// sequence-parallel all-gather before the q/k/v or gate/up column-parallel
// Linears (this is all-gather fused with copy_to_group).
at::Tensor all_gather_along_reduce_grad(const at::Tensor& x, int64_t dim,
                                        const dist::CommunicatorPtr& group,
                                        const std::vector<int64_t>& sizes);

// Reduce-scatter along dim (Partial -> Shard): every rank holds a full-shape
// partial tensor; returns chunk `rank` (torch.chunk of x.size(dim)) of the sum.
// Backward all-gathers the shard gradients (returned replicated).
at::Tensor reduce_scatter_along(const at::Tensor& x, int64_t dim, const dist::CommunicatorPtr& group);

// This rank's chunk of a replicated x along dim (Replicate -> Shard), as a new
// tensor; no communication. Backward all-gathers the shard gradients.
at::Tensor split_along(const at::Tensor& x, int64_t dim, const dist::CommunicatorPtr& group);

// Shard(src_dim) -> Shard(dst_dim) with one all-to-all. x holds src_sizes[rank]
// elements along src_dim and the full extent along dst_dim; the result holds
// the full sum(src_sizes) along src_dim and chunk `rank` of dst_dim. Backward
// is the inverse all-to-all (Shard(dst_dim) -> Shard(src_dim), same sizes).
at::Tensor all_to_all_along(const at::Tensor& x, int64_t src_dim, int64_t dst_dim,
                            const dist::CommunicatorPtr& group, const std::vector<int64_t>& src_sizes);

}  // namespace tessel::tensor
