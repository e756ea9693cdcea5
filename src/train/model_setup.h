// Building the model a run trains and laying it out over the device mesh
// (ARCHITECTURE "One training step"): the model comes from a built-in preset
// (initialised from the run's seed, identical on every rank) or a local
// Hugging Face directory. It is built on the meta device, so no rank ever
// holds it whole. With tp > 1 the resolved plan (custom > optimized > HF) is
// applied first over the mesh's tp group, so each parameter becomes its
// tp-local piece; then fully_shard is applied bottom-up — each decoder
// layer, then the root, which takes the embedding, final norm and lm_head —
// over the dp_shard_cp group (dim 0 of the tp-local tensors), replicated over
// dp_replicate (HSDP). Only then do the shards get values: each rank reads or
// generates its own rows (train/shard_loading.h). Every rank makes the same
// calls in the same order.
//
// World size 1 goes through the same path (a one-rank shard group) so a
// single-process run is the very code a multi-rank run executes.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "config/parallelism_config.h"
#include "dist/device_mesh.h"
#include "fsdp/fully_shard.h"
#include "models/causal_lm.h"
#include "models/init.h"
#include "optim/adamw.h"
#include "optim/grad_norm.h"
#include "parallel/param_registry.h"
#include "parallel/expert_dispatch.h"
#include "parallel/ring_attention.h"
#include "tensor/shard_spec.h"
#include "train/train_options.h"

namespace tessel::train {

// How gradients of several micro batches of one step are accumulated
// (policy.dtensor_cfg.accumulate_unsharded_grads).
enum class GradAccumulation {
  // Every micro batch reduce-scatters into the sharded gradients; HSDP's
  // replicate all-reduce runs on the last one only. The default: the memory
  // of sharded gradients at every moment.
  ReduceScatterEach,
  // Full unsharded gradients accumulate on every rank and are reduced after
  // the last micro batch: fewer collectives for DDP-sized gradient memory.
  UnshardedUntilLast,
};

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
  GradAccumulation accumulation = GradAccumulation::ReduceScatterEach;
  // Context parallelism (cp > 1): the ring attention's time and bytes
  // (null without it).
  std::shared_ptr<parallel::RingAttentionStats> ring_stats = nullptr;
  // Expert parallelism (ep > 1; all null / empty without it): the groups the
  // experts split (ep) and shard (ep_shard) over, the expert parameters this
  // rank holds, the other ranks' experts (dropped here: initialisation draws
  // and discards them so every rank keeps the one-process random stream), and
  // the rows this rank's MoE layers exchanged.
  dist::CommunicatorPtr ep_group = nullptr;
  dist::CommunicatorPtr ep_shard_group = nullptr;
  std::set<std::string> expert_params = {};
  std::map<std::string, std::vector<int64_t>> other_ranks_params = {};  // name -> global shape
  std::shared_ptr<parallel::ExpertDispatchStats> expert_stats = nullptr;
  // policy.dtensor_cfg.shard_optimizer_over_replicas (HSDP): every FSDP
  // group, root first, whose optimizer part is split over dp_replicate
  // (fsdp::FSDPOptions::shard_optimizer_over_replicas), and that group; empty
  // / null otherwise. The optimizer then updates the groups' parts
  // (optimizer_params()), not `params`.
  std::vector<fsdp::FSDPParamGroup*> replica_groups = {};
  dist::CommunicatorPtr replicate_group = nullptr;

  // Whether the plan split `name` over tp (false for whole parameters).
  bool tp_sharded(const std::string& name) const;
  // Bytes of this rank's fp32 shards (what the optimizer updates).
  int64_t local_param_bytes() const;
  // The unsharded shape of `name`: the tp spec's when the plan split it,
  // else `tp_local` (the shape FSDP sharded, whole on every tp rank).
  std::vector<int64_t> global_shape(const std::string& name, const std::vector<int64_t>& tp_local) const;
  // The shards grouped by the groups that partition them, for the global
  // gradient norm (each element counted once; see optim/grad_norm.h):
  // tp-sharded weights over dp_shard_cp and tp, the rest over dp_shard_cp;
  // under expert parallelism the experts over ep_shard and ep.
  std::vector<optim::GradShardSet> grad_sets() const;
  // What the optimizer updates: `params`, or with replica_groups their
  // parts (one per group, in that order).
  std::vector<at::Tensor> optimizer_params() const;
  // Issues group i's all-gather of the updated parts (no-op without
  // replica_groups): for AdamW::step's `updated`.
  void send_updated_part(size_t i) const;
  // The optimizer's state per parameter of `params` (checkpoints keep it so,
  // whatever a run updates): `optimizer`'s own, or with replica_groups each
  // group's parts gathered from every replica and viewed as its parameters'
  // shards (collective over dp_replicate: every rank calls it). Undefined
  // moments before the first step.
  std::vector<optim::AdamWParamState> optimizer_state_per_param(const optim::AdamW& optimizer) const;
  // The reverse, for AdamW::load_state: state per parameter of `params`
  // (as a checkpoint holds it) -> per parameter the optimizer updates.
  std::vector<optim::AdamWParamState> optimizer_state_from_params(
      std::vector<optim::AdamWParamState> per_param) const;
};

// Reshards every FSDP group of the model, so the next forward gathers the
// shards as they are now and every parameter reads as its shard: a group kept
// gathered after a forward (the root's, an untied lm_head's) would otherwise
// go on using what it gathered. For code that swaps or reads the shards
// between steps (the reference policy, the decoding refit).
void reshard_everything(ShardedModel& model);

// Parameters of the whole (unsharded) model, counted from the shards' global
// shapes and the other ep ranks' experts.
int64_t global_parameter_count(const ShardedModel& model);

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

// The model a run trains, built on the meta device (no memory), and where
// its values come from: a Hugging Face directory, or the seeded
// initialisation of a built-in preset.
struct ModelSource {
  std::shared_ptr<models::CausalLM> model;  // meta device
  std::optional<std::string> weights_dir;   // HF directory; none: init from the recipe
  std::vector<models::ParamInit> init;      // the preset's recipe (unsharded shapes)
  uint64_t seed = 0;
};

// From policy.model_name (preset name or HF directory); UsageError when it is
// neither, listing the presets. Reads config.json only.
ModelSource model_source(const TrainOptions& options);

// Applies the tensor-parallel plan (tp > 1), context parallelism (cp > 1:
// ring attention over the cp group), activation checkpointing and
// fully_shard (decoder layers, then root) to `model` over `mesh`. Gradients
// are SUM-reduced with no division: the trainer normalises the loss by the
// global valid-token count itself. UsageError when no plan applies. A model
// on the meta device gets zero shards, to be filled (train/shard_loading.h).
ShardedModel shard_model(std::shared_ptr<models::CausalLM> model, const dist::DeviceMesh& mesh,
                         const TrainOptions& options, const config::ParallelismConfig& parallelism);

// model_source + shard_model + filling the shards from the source: the
// model of a run, never whole on any rank (SPEC 4's memory contract at load).
ShardedModel setup_model(const TrainOptions& options, const dist::DeviceMesh& mesh,
                         const config::ParallelismConfig& parallelism);

}  // namespace tessel::train
