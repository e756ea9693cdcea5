// redistribute: converts the local tensor of one logical tensor from one
// Layout to another on one group (one mesh dimension), as an autograd op —
// SPEC 3's redistribution table:
//
//   from \ to   Replicate         Shard(b)                 Partial
//   Replicate   identity          local chunk              rank 0 keeps x,
//                                 (bwd all-gather)         others zeros (bwd identity)
//   Shard(a)    all-gather        a == b: identity         own chunk zero-padded to
//               (bwd see below)   else all-to-all          the full shape, no comm
//                                 (bwd inverse all-to-all) (bwd local chunk)
//   Partial     all-reduce        reduce-scatter           identity
//               (bwd identity)    (bwd all-gather)
//
// Gradient convention (the one of the autograd collectives): gradients of
// Replicate and Partial tensors are returned replicated — every rank holds the
// full gradient — and gradients of shards as this rank's chunk. The one
// ambiguous case is the gradient of an all-gathered output (Shard -> Replicate),
// which depends on what consumes the output: GatheredGrad says which.
//
// Shard(d) uses torch.chunk sizes (chunking.h); trailing ranks may hold short or
// empty chunks. Negative dims count from the end.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "dist/communicator.h"
#include "tensor/layout.h"

namespace tessel::tensor {

// How the gradient of a Shard -> Replicate output arrives in backward.
enum class GatheredGrad {
  // Each rank holds its own contribution: the gathered tensor feeds sharded
  // computation (e.g. sequence-parallel activations entering column-parallel
  // Linears). Backward reduce-scatters — the adjoint SPEC 3 names
  // (all-gather <-> reduce-scatter). The default.
  Partial,
  // Every rank holds the same full gradient: the gathered tensor feeds
  // replicated computation. Backward takes this rank's chunk, no communication.
  Replicated,
};

// global_size: the global extent along the sharded dim — of `from` when it is
// Shard, where it is required (a rank cannot infer uneven shard sizes from its
// own); else of `to` when it is Shard, where x holds that dim whole and the
// value, if given, is checked against x. Identities return x itself. Throws
// tessel::Error on a size mismatch, a dim out of range, or a null group.
at::Tensor redistribute(const at::Tensor& x, const Layout& from, const Layout& to,
                        const dist::CommunicatorPtr& group, std::optional<int64_t> global_size = std::nullopt,
                        GatheredGrad gathered_grad = GatheredGrad::Partial);

}  // namespace tessel::tensor
