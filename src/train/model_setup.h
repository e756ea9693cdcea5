// Building the model a run trains and laying it out over the device mesh
// (ARCHITECTURE "One training step"): the model comes from a built-in preset
// (initialised from the run's seed, identical on every rank) or a local
// Hugging Face directory. With tp > 1 the resolved plan (custom > optimized >
// HF) is applied first over the mesh's tp group, so each parameter becomes
// its tp-local piece; then fully_shard is applied bottom-up — each decoder
// layer, then the root, which takes the embedding, final norm and lm_head —
// over the dp_shard_cp group (dim 0 of the tp-local tensors), replicated over
// dp_replicate (HSDP). Every rank makes the same calls in the same order.
//
// World size 1 goes through the same path (a one-rank shard group) so a
// single-process run is the very code a multi-rank run executes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "config/parallelism_config.h"
#include "dist/device_mesh.h"
#include "fsdp/fully_shard.h"
#include "models/causal_lm.h"
#include "optim/grad_norm.h"
#include "parallel/param_registry.h"
#include "tensor/shard_spec.h"
#include "train/train_options.h"

namespace tessel::train {

struct ShardedModel {
  std::shared_ptr<models::CausalLM> model;
  fsdp::FSDPModule root;  // handle of the root's fully_shard
  // The trainable tensors the optimizer updates (the fp32 local shards) and
  // their names, in model->named_parameters() order.
  std::vector<at::Tensor> params;
  std::vector<std::string> param_names;
  dist::CommunicatorPtr fsdp_group;  // dp_shard_cp
  dist::CommunicatorPtr tp_group;    // size 1 without tensor parallelism
  // Each parameter's tp placement (empty registry without tensor parallelism:
  // every parameter is whole on each tp rank).
  parallel::ParamRegistry tp_params;

  // Whether the plan split `name` over tp (false for whole parameters).
  bool tp_sharded(const std::string& name) const;
  // The unsharded shape of `name`: the tp spec's when the plan split it,
  // else `tp_local` (the shape FSDP sharded, whole on every tp rank).
  std::vector<int64_t> global_shape(const std::string& name, const std::vector<int64_t>& tp_local) const;
  // The shards grouped by the groups that partition them, for the global
  // gradient norm (each element counted once; see optim/grad_norm.h):
  // tp-sharded weights over dp_shard_cp and tp, the rest over dp_shard_cp.
  std::vector<optim::GradShardSet> grad_sets() const;
};

// One parameter's place on the whole mesh (SPEC 3: one ShardSpec per
// parameter): its global shape and the placements [tp, dp_shard_cp], nested
// (FSDP chunks dim 0 of the tp piece); `local` is this rank's live fp32 shard,
// spec.local_view(full, coords) of the full tensor.
struct MeshParameter {
  at::Tensor local;
  tensor::ShardSpec spec;
  tensor::MeshCoords coords;
};

// Every parameter of the sharded model, by name. tessel::Error for a packed
// (fused gate||up) weight, whose tp piece is not one box of the full tensor.
std::vector<std::pair<std::string, MeshParameter>> mesh_state_dict(const ShardedModel& model);

// The unsharded model as configured (preset name or HF directory); UsageError
// when model_name is neither, listing the presets.
std::shared_ptr<models::CausalLM> build_model(const TrainOptions& options);

// Applies the tensor-parallel plan (tp > 1), activation checkpointing and
// fully_shard (decoder layers, then root) to `model` over `mesh`. Gradients
// are SUM-reduced with no division: the trainer normalises the loss by the
// global valid-token count itself. UsageError when no plan applies.
ShardedModel shard_model(std::shared_ptr<models::CausalLM> model, const dist::DeviceMesh& mesh,
                         const TrainOptions& options, const config::ParallelismConfig& parallelism);

}  // namespace tessel::train
