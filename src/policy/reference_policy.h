// The reference policy of DPO and GRPO (SPEC 11): the initial weights, kept
// as this rank's own copy of its local shards (as NeMo RL's DTensor worker
// does), so the memory is one more set of local shards per rank, never a
// whole model. For the reference's log-probs the copies are swapped into the
// live parameters in place, the forward runs, and they are swapped back: the
// policy's shards are restored bit for bit, and the optimizer, which holds
// the same tensors, sees nothing.
//
// Swapping works element block by element block through one small buffer
// (1 MiB), so it needs no second copy. Around each swap every FSDP group is
// resharded: a group kept unsharded after a forward (the root's, an untied
// lm_head's) would otherwise go on using the weights it gathered before the
// swap. The world waits at a barrier first, so that with node-shared
// parameters no rank still reads a row another rank is about to swap.
//
// Checkpoints keep the copies (train::ShardSets kind "reference"), so a
// resumed run keeps the reference it started with.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "dist/device_mesh.h"
#include "train/checkpoint.h"
#include "train/model_setup.h"

namespace tessel::policy {

class ReferencePolicy {
 public:
  // Copies the model's local shards as they are now.
  explicit ReferencePolicy(train::ShardedModel& model);

  // Runs `fn` with the reference weights in the model, then restores the
  // policy's. Collective over the mesh's world (barriers, and whatever `fn`
  // does). The policy's weights come back even when `fn` throws.
  void with_reference_weights(train::ShardedModel& model, const dist::DeviceMesh& mesh,
                              const std::function<void()>& fn);

  // The copies as a checkpoint keeps and restores them ({"reference": name -> shard}).
  train::ShardSets& shard_sets() { return sets_; }
  // Bytes of the copies (each tensor once; a tied parameter is one tensor).
  int64_t bytes() const { return bytes_; }

 private:
  void swap(train::ShardedModel& model, const dist::DeviceMesh& mesh);

  train::ShardSets sets_;
  int64_t bytes_ = 0;
};

// get_reference_policy_logprobs: policy/logprobs.h's get_logprobs with the
// reference weights.
at::Tensor get_reference_policy_logprobs(ReferencePolicy& reference, train::ShardedModel& model,
                                         const dist::DeviceMesh& mesh, const at::Tensor& input_ids,
                                         const at::Tensor& input_lengths, double temperature = 1.0,
                                         bool fused_head = false);

}  // namespace tessel::policy
