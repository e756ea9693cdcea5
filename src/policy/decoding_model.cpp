#include "policy/decoding_model.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <map>
#include <set>

#include "core/error.h"
#include "fsdp/state_dict.h"
#include "models/registry.h"
#include "nn/format.h"
#include "parallel/param_registry.h"
#include "parallel/parallelize.h"
#include "parallel/resolve.h"
#include "tensor/chunking.h"
#include "tensor/dim_collectives.h"

namespace tessel::policy {

namespace {

// Gives every parameter of a model built on the meta device memory of
// `options` (values to be filled).
void materialise(models::CausalLM& model, const at::TensorOptions& options) {
  for (const auto& [path, module] : nn::named_tessel_modules(model)) {
    for (const auto& item : module->named_parameters(/*recurse=*/false)) {
      module->replace_parameter(item.key(), at::empty(item.value().sizes(), options));
    }
  }
}

// A parameter of an expert, "....experts.{e}.rest": the parts around e.
struct ExpertName {
  std::string before, after;  // "....experts." and ".rest"
  int64_t expert = -1;
};
ExpertName expert_name(const std::string& name) {
  static const std::string kExperts = ".experts.";
  const auto at = name.find(kExperts);
  TESSEL_CHECK(at != std::string::npos, "parameter '{}' is not an expert's", name);
  const auto begin = at + kExperts.size();
  const auto end = name.find('.', begin);
  TESSEL_CHECK(end != std::string::npos, "parameter '{}' is not an expert's", name);
  return {name.substr(0, begin), name.substr(end), std::stoll(name.substr(begin, end - begin))};
}

}  // namespace

DecodingLayout parse_decoding_layout(const std::string& value, const std::string& key) {
  if (value == "auto") return DecodingLayout::Auto;
  if (value == "replicated") return DecodingLayout::Replicated;
  if (value == "tensor_parallel") return DecodingLayout::TensorParallel;
  throw UsageError(fmt::format("{}: '{}' is not a decoding layout; use auto, replicated (a whole copy of the model "
                               "per rank) or tensor_parallel (split over the run's tp group)",
                               key, value));
}

std::string to_string(DecodingLayout layout) {
  switch (layout) {
    case DecodingLayout::Auto: return "auto";
    case DecodingLayout::Replicated: return "replicated";
    case DecodingLayout::TensorParallel: return "tensor_parallel";
  }
  return "?";
}

DecodingModel::DecodingModel(train::ShardedModel& trained, const dist::DeviceMesh& mesh,
                             const config::ParallelismConfig& parallelism, DecodingLayout layout, at::ScalarType dtype)
    : layout_(layout), device_(mesh.device()) {
  at::NoGradGuard no_grad;
  const int tp = mesh.size("tp");
  if (layout_ == DecodingLayout::Auto) layout_ = tp > 1 ? DecodingLayout::TensorParallel : DecodingLayout::Replicated;
  if (tp == 1) layout_ = DecodingLayout::Replicated;  // a tp group of one holds the whole model
  const models::ModelConfig& config = trained.model->config();
  models::BuildOptions meta;
  meta.dtype = dtype;
  meta.device = c10::Device(c10::kMeta);
  model_ = models::build_model(config, meta);
  if (layout_ == DecodingLayout::TensorParallel) {
    tp_group_ = mesh.group("tp");
    row_group_ = mesh.group("dp_cp");
    config::ParallelismConfig choices = parallelism;
    choices.sequence_parallel = false;  // one position per row and step: nothing to cut over tp
    parallel::ResolveOptions resolve;
    resolve.vocab_parallel_loss = true;  // logits stay vocab-sharded; whole_vocabulary() joins the sampled rows
    resolve.log = false;
    const auto plan = parallel::resolve_parallel_plan(mesh.layout(), choices, config, resolve);
    parallel::parallelize(*model_, tp_group_, plan.plan, plan.parallelize_options);
  } else {
    row_group_ = mesh.world();
  }
  materialise(*model_, at::TensorOptions().dtype(dtype).device(device_));

  std::map<std::string, at::Tensor> targets;
  for (const auto& item : model_->named_parameters(/*recurse=*/true)) targets.emplace(item.key(), item.value());
  std::set<std::string> filled;
  auto fill = [&](const std::string& name, const at::Tensor& value) {
    const auto it = targets.find(name);
    TESSEL_CHECK(it != targets.end(), "refit: the decoding model has no parameter '{}'", name);
    TESSEL_CHECK(it->second.sizes() == value.sizes(),
                 "refit: '{}' is {} in the decoding model ({} layout) but {} from the shards", name,
                 nn::shape_string(it->second.sizes()), to_string(layout_), nn::shape_string(value.sizes()));
    it->second.copy_(value);
    filled.insert(name);
  };

  // The shards as they are now (no group still holds what a forward gathered).
  train::reshard_everything(trained);
  const dist::CommunicatorPtr& ep = trained.ep_group;
  fsdp::for_each_full_parameter(*trained.model, [&](const std::string& name, const at::Tensor& full) {
    if (ep != nullptr && ep->size() > 1 && trained.expert_params.count(name) != 0) {
      // Every ep rank's expert at this place of the order: rank r holds
      // experts [r E/ep, (r+1) E/ep) (parallel/expert_parallel.h).
      const ExpertName parts = expert_name(name);
      const int64_t per_rank = config.num_experts / ep->size();
      const int64_t local = parts.expert - ep->rank() * per_rank;
      const at::Tensor mine = full.contiguous().view({-1});
      at::Tensor all = at::empty({ep->size() * mine.numel()}, mine.options());
      ep->all_gather_into(all, mine);
      for (int r = 0; r < ep->size(); ++r) {
        fill(parts.before + std::to_string(r * per_rank + local) + parts.after,
             all.narrow(0, r * mine.numel(), mine.numel()).view(full.sizes()));
      }
      return;
    }
    if (layout_ == DecodingLayout::Replicated && trained.tp_sharded(name)) {
      fill(name, parallel::full_tensor(full, trained.tp_params.at(name), trained.tp_group));
      return;
    }
    fill(name, full);
  });
  for (const auto& [name, tensor] : targets) {
    TESSEL_CHECK(filled.count(name) != 0, "refit: no value for the decoding model's parameter '{}'", name);
  }
  std::set<const void*> counted;
  for (const auto& [name, tensor] : targets) {
    if (counted.insert(tensor.data_ptr()).second) {
      weight_bytes_ += tensor.numel() * static_cast<int64_t>(tensor.element_size());
    }
  }
}

DecodingModel::~DecodingModel() = default;

at::Tensor DecodingModel::whole_vocabulary(const at::Tensor& local_logits) const {
  if (tp_group_ == nullptr || tp_group_->size() == 1 || local_logits.size(-1) == vocab_size()) return local_logits;
  return tensor::all_gather_dim(local_logits.contiguous(), local_logits.dim() - 1, *tp_group_,
                                tensor::chunk_sizes(vocab_size(), tp_group_->size()));
}

}  // namespace tessel::policy
