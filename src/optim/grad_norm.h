// Global gradient norm and clipping across a device mesh, counting every
// parameter element exactly once.
//
// A rank holds gradients of local shards. A gradient sharded over some groups
// (FSDP's dp_shard_cp; tp for a tensor-parallel weight) has its squared norm
// summed over exactly those groups; over groups where it is replicated
// (dp_replicate under HSDP; tp for a replicated norm weight) it is not summed,
// otherwise it would be counted several times (one reference system
// over-counts TP-replicated weights; we do not).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "dist/communicator.h"

namespace tessel::optim {

struct GradShardSet {
  std::vector<at::Tensor> grads;                        // undefined grads count as zero
  std::vector<dist::CommunicatorPtr> sharded_over;      // groups that partition these tensors
};

// L2 norm of all gradients of all sets, identical on every rank of the mesh.
// Collective: every rank must pass sets with the same structure.
double global_grad_norm(const std::vector<GradShardSet>& sets);

// Scales every gradient by max_norm / (norm + 1e-6) when the norm exceeds
// max_norm (torch.nn.utils.clip_grad_norm_ semantics). Returns the norm before
// clipping. max_norm <= 0 disables clipping but still returns the norm.
double clip_grad_norm(const std::vector<GradShardSet>& sets, double max_norm);

// The factor clip_grad_norm scales the gradients by: max_norm / (norm + 1e-6)
// when the norm exceeds max_norm, else 1 (also when max_norm <= 0). For an
// optimizer that applies it while reading each gradient (AdamW::step), which
// spares the pass that rewrites every gradient.
double clip_coefficient(double norm, double max_norm);

}  // namespace tessel::optim
