// Building the model a run trains and laying it out over the device mesh
// (ARCHITECTURE "One training step"): the model comes from a built-in preset
// (initialised from the run's seed, identical on every rank) or a local
// Hugging Face directory; then fully_shard is applied bottom-up — each
// decoder layer, then the root, which takes the embedding, final norm and
// lm_head — over the mesh's dp_shard_cp group, replicated over dp_replicate
// (HSDP). Every rank makes the same calls in the same order.
//
// World size 1 goes through the same path (a one-rank shard group) so a
// single-process run is the very code a multi-rank run executes.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "dist/device_mesh.h"
#include "fsdp/fully_shard.h"
#include "models/causal_lm.h"
#include "optim/grad_norm.h"
#include "train/train_options.h"

namespace tessel::train {

struct ShardedModel {
  std::shared_ptr<models::CausalLM> model;
  fsdp::FSDPModule root;  // handle of the root's fully_shard
  // The trainable tensors the optimizer updates: the fp32 local shards.
  std::vector<at::Tensor> params;
  // The shards grouped by the groups that partition them, for the global
  // gradient norm (each element counted once; see optim/grad_norm.h).
  std::vector<optim::GradShardSet> grad_sets() const;
  std::vector<dist::CommunicatorPtr> shard_groups;  // groups partitioning `params`
};

// The unsharded model as configured (preset name or HF directory); UsageError
// when model_name is neither, listing the presets.
std::shared_ptr<models::CausalLM> build_model(const TrainOptions& options);

// Applies activation checkpointing and fully_shard (decoder layers, then
// root) to `model` over `mesh`. Gradients are SUM-reduced with no division:
// the trainer normalises the loss by the global valid-token count itself.
ShardedModel shard_model(std::shared_ptr<models::CausalLM> model, const dist::DeviceMesh& mesh,
                         const TrainOptions& options);

}  // namespace tessel::train
