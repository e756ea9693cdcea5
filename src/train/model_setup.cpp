#include "train/model_setup.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "io/hf_checkpoint.h"
#include "models/presets.h"
#include "fsdp/fsdp_param_group.h"
#include "fsdp/state_dict.h"
#include "models/pretrained.h"
#include "models/registry.h"
#include "train/shard_loading.h"
#include "parallel/context_parallel.h"
#include "parallel/expert_parallel.h"
#include "parallel/expert_parallel_check.h"
#include "parallel/head_split.h"
#include "parallel/parallelize.h"
#include "parallel/resolve.h"

namespace tessel::train {

namespace fs = std::filesystem;

bool ShardedModel::tp_sharded(const std::string& name) const {
  return tp_params.contains(name) && parallel::is_tp_sharded(tp_params.at(name));
}

int64_t ShardedModel::local_param_bytes() const {
  int64_t bytes = 0;
  for (const auto& p : params) bytes += p.numel() * static_cast<int64_t>(p.element_size());
  return bytes;
}

std::vector<int64_t> ShardedModel::global_shape(const std::string& name, const std::vector<int64_t>& tp_local) const {
  return tp_sharded(name) ? tp_params.at(name).spec.global_shape() : tp_local;
}

std::vector<optim::GradShardSet> ShardedModel::grad_sets() const {
  if (!replica_groups.empty()) {
    // Each replica's parts partition its shards, the shards the parameters
    // (tp and ep are refused with the split: parallelism_config.cpp).
    optim::GradShardSet parts{{}, {fsdp_group, replicate_group}};
    for (const fsdp::FSDPParamGroup* g : replica_groups) parts.grads.push_back(g->replica_part().grad());
    return {parts};
  }
  optim::GradShardSet sharded{{}, {fsdp_group, tp_group}};
  optim::GradShardSet whole{{}, {fsdp_group}};
  // An expert's rows partition over ep_shard, the experts over ep: every
  // expert element once in the world.
  optim::GradShardSet experts{{}, {ep_shard_group, ep_group}};
  for (size_t i = 0; i < params.size(); ++i) {
    if (expert_params.contains(param_names[i])) {
      experts.grads.push_back(params[i].grad());
    } else {
      (tp_sharded(param_names[i]) ? sharded : whole).grads.push_back(params[i].grad());
    }
  }
  if (!ep_group) return {sharded, whole};
  return {sharded, whole, experts};
}

std::vector<at::Tensor> ShardedModel::optimizer_params() const {
  if (replica_groups.empty()) return params;
  std::vector<at::Tensor> parts;
  for (const fsdp::FSDPParamGroup* g : replica_groups) parts.push_back(g->replica_part());
  return parts;
}

void ShardedModel::send_updated_part(size_t i) const {
  if (i < replica_groups.size()) replica_groups[i]->gather_replica_parts();
}

namespace {

using ParamIndex = std::map<const c10::TensorImpl*, size_t>;

// Where each of `params` is in that list, by tensor.
ParamIndex index_of(const std::vector<at::Tensor>& params) {
  ParamIndex index;
  for (size_t i = 0; i < params.size(); ++i) index[params[i].unsafeGetTensorImpl()] = i;
  return index;
}

// params' index of each shard of `group` (params() order).
std::vector<size_t> param_indices(const ParamIndex& index, const fsdp::FSDPParamGroup& group) {
  std::vector<size_t> out;
  for (const fsdp::FSDPParam* p : group.params()) {
    const auto it = index.find(p->sharded_param().unsafeGetTensorImpl());
    TESSEL_CHECK(it != index.end(), "group {}: a shard that is not one of the model's parameters", group.name());
    out.push_back(it->second);
  }
  return out;
}

}  // namespace

std::vector<optim::AdamWParamState> ShardedModel::optimizer_state_per_param(const optim::AdamW& optimizer) const {
  if (replica_groups.empty()) return optimizer.state();
  at::NoGradGuard no_grad;
  std::vector<optim::AdamWParamState> out(params.size());
  const ParamIndex index = index_of(params);
  const auto& parts = optimizer.state();  // one per group, replica_groups' order
  TESSEL_CHECK(parts.size() == replica_groups.size(), "the optimizer holds {} parts for {} split groups",
               parts.size(), replica_groups.size());
  for (size_t g = 0; g < replica_groups.size(); ++g) {
    const fsdp::FSDPParamGroup& group = *replica_groups[g];
    // Every rank took the same number of steps: defined everywhere or nowhere.
    if (!parts[g].exp_avg.defined()) continue;
    const std::vector<size_t> indices = param_indices(index, group);
    const std::vector<at::Tensor> avg = group.shard_views(group.gather_parts_of(parts[g].exp_avg));
    const std::vector<at::Tensor> avg_sq = group.shard_views(group.gather_parts_of(parts[g].exp_avg_sq));
    for (size_t k = 0; k < indices.size(); ++k) out[indices[k]] = {avg[k], avg_sq[k]};
  }
  return out;
}

std::vector<optim::AdamWParamState> ShardedModel::optimizer_state_from_params(
    std::vector<optim::AdamWParamState> per_param) const {
  if (replica_groups.empty()) return per_param;
  at::NoGradGuard no_grad;
  std::vector<optim::AdamWParamState> parts(replica_groups.size());
  const ParamIndex index = index_of(params);
  for (size_t g = 0; g < replica_groups.size(); ++g) {
    const fsdp::FSDPParamGroup& group = *replica_groups[g];
    const std::vector<size_t> indices = param_indices(index, group);
    if (indices.empty() || !per_param.at(indices.front()).exp_avg.defined()) continue;
    // The zero tail past the shards stays zero: its gradient is zero too.
    at::Tensor avg = at::zeros({group.replica_part().numel() * replicate_group->size()},
                               group.replica_part().options());
    at::Tensor avg_sq = at::zeros_like(avg);
    const std::vector<at::Tensor> avg_views = group.shard_views(avg);
    const std::vector<at::Tensor> avg_sq_views = group.shard_views(avg_sq);
    for (size_t k = 0; k < indices.size(); ++k) {
      const optim::AdamWParamState& st = per_param.at(indices[k]);
      avg_views[k].copy_(st.exp_avg);
      avg_sq_views[k].copy_(st.exp_avg_sq);
    }
    parts[g] = {group.part_of(avg), group.part_of(avg_sq)};
  }
  return parts;
}

void reshard_everything(ShardedModel& model) {
  model.root.wait_for_replica_parts();  // the shards are read or swapped next
  for (const auto& module : model.model->modules()) {
    auto* m = dynamic_cast<nn::Module*>(module.get());
    if (m == nullptr) continue;
    if (auto handle = fsdp::fsdp_module(*m)) handle->reshard();
  }
}

int64_t global_parameter_count(const ShardedModel& model) {
  int64_t total = 0;
  for (const auto& [name, sp] : fsdp::sharded_state_dict(*model.model)) {
    int64_t n = 1;
    for (int64_t d : model.global_shape(name, sp.spec.global_shape())) n *= d;
    total += n;
  }
  for (const auto& [name, shape] : model.other_ranks_params) {  // the other ep ranks' experts
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    total += n;
  }
  return total;
}

std::vector<std::pair<std::string, MeshParameter>> mesh_state_dict(const ShardedModel& model) {
  std::vector<std::pair<std::string, MeshParameter>> out;
  for (auto& [name, sp] : fsdp::sharded_state_dict(*model.model)) {
    std::vector<tensor::Placement> placements;
    if (model.tp_sharded(name)) {
      const auto& tp = model.tp_params.at(name);
      TESSEL_CHECK(tp.packed_parts == 1, "parameter '{}' is a packed weight ({} parts): its tp piece is not one box "
                   "of the full tensor", name, tp.packed_parts);
      placements = tp.spec.placements();
    }
    for (const auto& p : sp.spec.placements()) placements.push_back(p);
    tensor::MeshCoords coords{{parallel::kTpMeshDim, {model.tp_group->size(), model.tp_group->rank()}},
                              {fsdp::kShardMeshDim, sp.shard}};
    out.emplace_back(name, MeshParameter{sp.local,
                                         tensor::ShardSpec(model.global_shape(name, sp.spec.global_shape()),
                                                           std::move(placements)),
                                         std::move(coords)});
  }
  return out;
}

ModelSource model_source(const TrainOptions& options) {
  const std::string& name = options.model_name;
  models::BuildOptions meta;
  meta.device = c10::Device(c10::kMeta);
  ModelSource source;
  source.seed = options.seed;
  std::error_code ec;
  if (fs::is_directory(name, ec)) {
    if (!fs::is_regular_file(fs::path(name) / "config.json", ec)) {
      throw UsageError(fmt::format("policy.model_name: directory {} has no config.json (expected "
                                   "a Hugging Face model directory)",
                                   name));
    }
    if (!fs::is_regular_file(fs::path(name) / io::kHfSafetensorsFile, ec) &&
        !fs::is_regular_file(fs::path(name) / io::kHfSafetensorsIndexFile, ec)) {
      throw UsageError(fmt::format("policy.model_name: directory {} has a config.json but no weights ({} or {}); "
                                   "to train from random weights, write them first with `tessel init-model "
                                   "--config {}/config.json NEW_DIR` and point policy.model_name at NEW_DIR",
                                   name, io::kHfSafetensorsFile, io::kHfSafetensorsIndexFile, name));
    }
    source.model = models::build_model(models::load_model_config(name), meta);
    source.weights_dir = name;
    return source;
  }
  const auto presets = models::preset_names();
  if (std::find(presets.begin(), presets.end(), name) == presets.end()) {
    throw UsageError(fmt::format("policy.model_name: '{}' is neither a local model directory "
                                 "(config.json + safetensors) nor a built-in preset ({})",
                                 name, fmt::join(presets, ", ")));
  }
  source.model = models::build_model(models::parse_model_config(models::make_preset_config(name), "preset " + name),
                                     meta);
  source.init = models::init_recipe(*source.model);
  return source;
}

ShardedModel setup_model(const TrainOptions& options, const dist::DeviceMesh& mesh,
                         const config::ParallelismConfig& parallelism) {
  ModelSource source = model_source(options);
  ShardedModel sharded = shard_model(source.model, mesh, options, parallelism);
  if (source.weights_dir) {
    load_hf_shards(sharded, *source.weights_dir);
  } else {
    init_shards(sharded, source.init, source.seed);
  }
  return sharded;
}

ShardedModel shard_model(std::shared_ptr<models::CausalLM> model, const dist::DeviceMesh& mesh,
                         const TrainOptions& options, const config::ParallelismConfig& parallelism) {
  const dist::CommunicatorPtr& tp_group = mesh.group("tp");
  const models::ModelConfig& config = model->config();
  if (models::is_moe(config) && mesh.layout().dim_size(dist::MeshDim::Cp) > 1) {
    // Each cp rank holds part of every sequence, and the load-balancing
    // loss is not a sum over tokens: it would need the router statistics of
    // the whole sequence (an all-reduce over cp not built yet).
    throw UsageError(fmt::format("context_parallel_size={} is not supported for the mixture-of-experts model {}: "
                                 "context parallelism over MoE models is not built yet; set "
                                 "policy.dtensor_cfg.context_parallel_size=1",
                                 mesh.layout().dim_size(dist::MeshDim::Cp), config.architecture));
  }
  parallel::check_expert_parallel(mesh.layout().ep(), config);
  const bool expert_parallel = mesh.layout().ep() > 1;
  std::map<std::string, std::vector<int64_t>> other_ranks_params;
  std::shared_ptr<parallel::ExpertDispatchStats> ep_stats;
  if (expert_parallel) {
    // Before anything is materialised: the other ranks' experts never are here.
    ep_stats = std::make_shared<parallel::ExpertDispatchStats>();
    other_ranks_params = parallel::apply_expert_parallel(*model, mesh.group("ep"), ep_stats);
  }
  parallel::ParamRegistry tp_params;
  if (tp_group->size() > 1) {
    parallel::ResolveOptions resolve;
    resolve.vocab_parallel_loss = true;  // train_step takes vocab-sharded logits as they are
    const auto plan = parallel::resolve_parallel_plan(mesh.layout(), parallelism, model->config(), resolve);
    tp_params = parallel::parallelize(*model, tp_group, plan.plan, plan.parallelize_options).params;
    parallel::check_whole_heads(model->config(), tp_params, tp_group->size());
  }
  std::shared_ptr<parallel::RingAttentionStats> ring_stats;
  if (mesh.size("cp") > 1) {
    ring_stats = std::make_shared<parallel::RingAttentionStats>();
    parallel::apply_context_parallel(*model, mesh.group("cp"), ring_stats);
  }
  fsdp::FSDPMesh fsdp_mesh(mesh.group("dp_shard_cp"), mesh.group("dp_replicate"), mesh.device());
  fsdp_mesh.set_gradient_divide_factor(1);
  fsdp::FSDPOptions fsdp_options;
  fsdp_options.reshard_after_forward = options.reshard_after_forward;
  fsdp_options.node_shared_params = parallelism.node_shared_params;
  fsdp_options.shard_optimizer_over_replicas = parallelism.shard_optimizer_over_replicas;
  if (compute_dtype(options) != at::kFloat) {
    fsdp_options.mp_policy.param_dtype = compute_dtype(options);
    fsdp_options.mp_policy.reduce_dtype = at::kFloat;
  }
  // Under expert parallelism each expert is a group of its own over
  // ep_shard (the ranks holding the same experts), applied before its layer
  // so the layer's group takes only the dense rest. Gradients are SUMs, as
  // for the dense groups: the loss is normalised by the global token count.
  fsdp::FSDPMesh expert_mesh(mesh.group("ep_shard"), nullptr, mesh.device());
  expert_mesh.set_gradient_divide_factor(1);
  for (const auto& layer : model->decoder_layers()) {
    if (options.activation_checkpointing) layer->set_activation_checkpointing(true);
    if (expert_parallel) {
      for (const auto& block : parallel::sparse_moe_blocks(*layer)) {
        for (const auto& expert : block->experts()->items()) fsdp::fully_shard(*expert, expert_mesh, fsdp_options);
      }
    }
    fsdp::fully_shard(*layer, fsdp_mesh, fsdp_options);
  }
  // An untied lm_head is a group of its own: its gradients are the first
  // complete in backward, so their reduce-scatter (and HSDP's all-reduce
  // across nodes) overlaps every layer's backward instead of waiting at the
  // end with the embedding's. Backward starts right after its forward, so it
  // stays gathered in between (no second all-gather).
  if (model->tied_parameter_names().empty() && model->lm_head()) {
    fsdp::FSDPOptions head_options = fsdp_options;
    head_options.reshard_after_forward = false;
    fsdp::fully_shard(*model->lm_head(), fsdp_mesh, head_options);
  }
  ShardedModel out{model,           fsdp::fully_shard(*model, fsdp_mesh, fsdp_options), {}, {},
                   fsdp_mesh.shard(), tp_group, std::move(tp_params)};
  out.ring_stats = std::move(ring_stats);
  out.expert_stats = std::move(ep_stats);
  out.other_ranks_params = std::move(other_ranks_params);
  if (expert_parallel) {
    out.ep_group = mesh.group("ep");
    out.ep_shard_group = mesh.group("ep_shard");
  }
  out.replica_groups = out.root.replica_split_groups();
  if (!out.replica_groups.empty()) out.replicate_group = fsdp_mesh.replicate();
  out.accumulation = parallelism.accumulate_unsharded_grads ? GradAccumulation::UnshardedUntilLast
                                                            : GradAccumulation::ReduceScatterEach;
  for (const auto& item : model->named_parameters()) {
    if (!item.value().requires_grad()) continue;
    out.params.push_back(item.value());
    out.param_names.push_back(item.key());
    if (expert_parallel && item.key().find(".experts.") != std::string::npos) out.expert_params.insert(item.key());
  }
  return out;
}

}  // namespace tessel::train
