// Stateless helpers over a list of FSDPParams (PyTorch FSDP2's
// _fsdp_collectives): the layouts that turn per-parameter tensors into the
// flat buffers a group all-gathers or reduce-scatters.
//
// Layouts, for a group of parameters p with padded shards of s_p elements at
// offset o_p (L = sum of s_p, W = shard world size):
//   local buffer      [L]        this rank's padded shards, parameter after parameter
//   unsharded buffer  [W * L]    parameter-major: parameter p's W padded chunks at
//                                W*o_p, i.e. its full rows followed by padding
//   packed buffer     [W * L]    rank-major: rank r's local-layout row at r*L (what
//                                reduce_scatter_from splits)
// The all-gather fills the unsharded buffer directly: each parameter's shards
// form one segment of the local buffer, gathered rank-major into its own
// W*s_p region (Communicator::all_gather_segments_async), which is that
// parameter's rows. The reduce-scatter needs every rank's row contiguous, so
// the gradients are packed rank-major first.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "fsdp/fsdp_param.h"

namespace tessel::fsdp {

// Full-shape gradients (undefined = zero) -> `packed` [W*L] (its contents
// are overwritten: zero padding, rank-major), ready for reduce_scatter_from.
void pack_for_reduce_scatter(const std::vector<FSDPParam*>& params, const std::vector<at::Tensor>& grads,
                             int world, int64_t local_numel, const at::Tensor& packed);

// Parameter p's unpadded shard inside a local-layout buffer [L], shaped like
// its sharded param.
at::Tensor shard_view(const FSDPParam& param, const at::Tensor& local_buffer);

}  // namespace tessel::fsdp
