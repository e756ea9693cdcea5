#include "train/shard_loading.h"

#include <ATen/ATen.h>

#include <map>

#include "core/error.h"
#include "io/hf_checkpoint.h"
#include "models/pretrained.h"
#include "parallel/param_registry.h"

namespace tessel::train {

tensor::BoxMap local_shard_map(const ShardedModel& model, const std::string& name, const fsdp::ShardedParameter& sp) {
  const tensor::BoxMap piece =
      model.tp_sharded(name)
          ? parallel::local_piece_map(model.tp_params.at(name), model.tp_group->size(), model.tp_group->rank())
          : tensor::whole_tensor_map(sp.spec.global_shape());
  if (sp.local.dim() == 0) return piece;
  return tensor::narrow_local_rows(piece, sp.dim0_offset, sp.local.size(0));
}

at::Tensor box_view(const at::Tensor& t, const std::vector<int64_t>& offset, const std::vector<int64_t>& shape) {
  at::Tensor v = t;
  for (size_t d = 0; d < shape.size(); ++d) v = v.narrow(static_cast<int64_t>(d), offset[d], shape[d]);
  return v;
}

void init_shards(ShardedModel& model, const std::vector<models::ParamInit>& recipe, uint64_t seed) {
  at::NoGradGuard no_grad;
  std::map<std::string, fsdp::ShardedParameter> shards;
  for (auto& [name, sp] : fsdp::sharded_state_dict(*model.model)) shards.emplace(name, std::move(sp));
  TESSEL_CHECK(recipe.size() == shards.size() + model.other_ranks_params.size(),
               "initialisation recipe has {} parameters, the sharded model {} (+ {} on other ep ranks)", recipe.size(),
               shards.size(), model.other_ranks_params.size());
  models::InitialValues values(seed);
  for (const models::ParamInit& entry : recipe) {
    if (model.other_ranks_params.contains(entry.name)) {
      values.next(entry);  // another rank's expert: drawn to keep the stream, dropped
      continue;
    }
    const auto it = shards.find(entry.name);
    TESSEL_CHECK(it != shards.end(), "initialisation recipe names '{}', which the sharded model does not have",
                 entry.name);
    const fsdp::ShardedParameter& sp = it->second;
    TESSEL_CHECK(entry.shape == model.global_shape(entry.name, sp.spec.global_shape()),
                 "initialisation recipe shape of '{}' differs from the model's", entry.name);
    const at::Tensor full = values.next(entry);  // the one full parameter alive
    for (const tensor::BoxSegment& s : local_shard_map(model, entry.name, sp)) {
      box_view(sp.local, s.local_offset, s.shape).copy_(box_view(full, s.global_offset, s.shape));
    }
  }
}

void load_hf_shards(ShardedModel& model, const std::filesystem::path& dir) {
  const io::HfCheckpoint ckpt = io::HfCheckpoint::open(dir);
  const auto shards = fsdp::sharded_state_dict(*model.model);
  // Every tensor of the model is checked against the directory, the other ep
  // ranks' experts included (they are there, and must not read as unexpected);
  // only this rank's boxes are read.
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected;
  for (const auto& [name, sp] : shards) expected.emplace_back(name, model.global_shape(name, sp.spec.global_shape()));
  for (const auto& [name, shape] : model.other_ranks_params) expected.emplace_back(name, shape);
  models::check_checkpoint_tensors(ckpt, expected, *model.model);
  at::NoGradGuard no_grad;
  for (const auto& [name, sp] : shards) {
    for (const tensor::BoxSegment& s : local_shard_map(model, name, sp)) {
      if (s.numel() == 0) continue;
      ckpt.read_box_into(name, s.global_offset, box_view(sp.local, s.local_offset, s.shape));
    }
  }
}

}  // namespace tessel::train
