// Stateless helpers over a list of FSDPParams (PyTorch FSDP2's
// _fsdp_collectives): the layouts that turn per-parameter tensors into the one
// flat buffer a group all-gathers or reduce-scatters, and back.
//
// Layouts, for a group of parameters p with padded shards of s_p elements at
// offset o_p (L = sum of s_p, W = shard world size):
//   local buffer      [L]        this rank's padded shards, parameter after parameter
//   gathered buffer   [W * L]    rank-major: rank r's local buffer at r*L (what
//                                all_gather_into / reduce_scatter_from move)
//   unsharded buffer  [W * L]    parameter-major: parameter p's W padded chunks at
//                                W*o_p, i.e. its full rows followed by padding
// Rank-major data cannot be a strided view of a parameter's rows, so the copy
// out of the gathered buffer into the unsharded one is the one copy per gather.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "fsdp/fsdp_param.h"

namespace tessel::fsdp {

// gathered [W*L] (rank-major) -> unsharded [W*L] (parameter-major).
void copy_out_gathered(const std::vector<FSDPParam*>& params, const at::Tensor& gathered,
                       const at::Tensor& unsharded, int world, int64_t local_numel);

// Full-shape gradients (undefined = zero) -> `packed` [W*L] (its contents
// are overwritten: zero padding, rank-major), ready for reduce_scatter_from.
void pack_for_reduce_scatter(const std::vector<FSDPParam*>& params, const std::vector<at::Tensor>& grads,
                             int world, int64_t local_numel, const at::Tensor& packed);

// Parameter p's unpadded shard inside a local-layout buffer [L], shaped like
// its sharded param.
at::Tensor shard_view(const FSDPParam& param, const at::Tensor& local_buffer);

}  // namespace tessel::fsdp
