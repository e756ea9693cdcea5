// Filling the local shards of a model that was built on the meta device and
// sharded before it had any values (SPEC 4: the memory contract holds at
// load). Each rank computes which boxes of each global tensor its shard holds
// (local_shard_map: its tp piece, then its FSDP rows of that piece) and reads
// or generates only those:
//   - random initialisation: every parameter is drawn in full, in the order
//     one process draws them (models/init.h), its boxes copied out and the
//     rest dropped before the next one: all layouts start from the values of
//     world 1 and a rank holds at most one full parameter beyond its shards;
//   - a Hugging Face directory: the boxes are read straight from the
//     safetensors files into the shards (io::SafetensorsFile::read_box_into),
//     converted to fp32,
//     after the same checks load_weights makes.
// Training checkpoints resume the same way (train/checkpoint.cpp intersects
// the boxes each rank file holds with these).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "fsdp/state_dict.h"
#include "models/init.h"
#include "tensor/box_map.h"
#include "train/model_setup.h"

namespace tessel::train {

// Where this rank's shard of `name` (sp: its entry in fsdp::sharded_state_dict)
// sits in the global tensor; local coordinates are those of sp.local.
tensor::BoxMap local_shard_map(const ShardedModel& model, const std::string& name,
                               const fsdp::ShardedParameter& sp);

// The box [offset, offset + shape) of t, as a view.
at::Tensor box_view(const at::Tensor& t, const std::vector<int64_t>& offset, const std::vector<int64_t>& shape);

// Fills every shard from the seeded initialisation of `recipe` (init_recipe of
// the unsharded model, taken before tensor parallelism changed its shapes).
void init_shards(ShardedModel& model, const std::vector<models::ParamInit>& recipe, uint64_t seed);

// Fills every shard from the Hugging Face directory `dir` (model.safetensors
// or a sharded index), reading only this rank's rows. tessel::Error as
// models::check_checkpoint_tensors.
void load_hf_shards(ShardedModel& model, const std::filesystem::path& dir);

}  // namespace tessel::train
