#include "train/model_setup.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "models/presets.h"
#include "models/pretrained.h"

namespace tessel::train {

namespace fs = std::filesystem;

std::vector<optim::GradShardSet> ShardedModel::grad_sets() const {
  optim::GradShardSet set;
  set.sharded_over = shard_groups;
  set.grads.reserve(params.size());
  for (const auto& p : params) set.grads.push_back(p.grad());
  return {set};
}

std::shared_ptr<models::CausalLM> build_model(const TrainOptions& options) {
  const std::string& name = options.model_name;
  std::error_code ec;
  if (fs::is_directory(name, ec)) {
    if (!fs::is_regular_file(fs::path(name) / "config.json", ec)) {
      throw UsageError(fmt::format("policy.model_name: directory {} has no config.json (expected "
                                   "a Hugging Face model directory)",
                                   name));
    }
    return models::load_pretrained(name);
  }
  const auto presets = models::preset_names();
  if (std::find(presets.begin(), presets.end(), name) == presets.end()) {
    throw UsageError(fmt::format("policy.model_name: '{}' is neither a local model directory "
                                 "(config.json + safetensors) nor a built-in preset ({})",
                                 name, fmt::join(presets, ", ")));
  }
  return models::create_preset_model(name, options.seed);
}

ShardedModel shard_model(std::shared_ptr<models::CausalLM> model, const dist::DeviceMesh& mesh,
                         const TrainOptions& options) {
  fsdp::FSDPMesh fsdp_mesh(mesh.group("dp_shard_cp"), mesh.group("dp_replicate"));
  fsdp_mesh.set_gradient_divide_factor(1);
  fsdp::FSDPOptions fsdp_options;
  fsdp_options.reshard_after_forward = options.reshard_after_forward;
  if (options.precision == "bfloat16") {
    fsdp_options.mp_policy.param_dtype = at::kBFloat16;
    fsdp_options.mp_policy.reduce_dtype = at::kFloat;
  } else if (options.precision == "float16") {
    fsdp_options.mp_policy.param_dtype = at::kHalf;
    fsdp_options.mp_policy.reduce_dtype = at::kFloat;
  }
  for (const auto& layer : model->decoder_layers()) {
    if (options.activation_checkpointing) layer->set_activation_checkpointing(true);
    fsdp::fully_shard(*layer, fsdp_mesh, fsdp_options);
  }
  fsdp::FSDPOptions root_options = fsdp_options;
  ShardedModel out{model, fsdp::fully_shard(*model, fsdp_mesh, root_options), {}, {}};
  for (const auto& p : model->parameters()) {
    if (p.requires_grad()) out.params.push_back(p);
  }
  out.shard_groups = {mesh.group("dp_shard_cp")};
  return out;
}

}  // namespace tessel::train
