// State dicts of a model after fully_shard (SPEC 4 and 6): the sharded form,
// one local shard per parameter with the record of where it sits in the
// global tensor (for reshardable checkpoints), and the full form, gathered on
// every rank (for export to HF safetensors). Keys are the dotted parameter
// names under the given root; a tied parameter appears under each name.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/shard_spec.h"

namespace torch::nn {
class Module;
}

namespace tessel::fsdp {

// The mesh dim name FSDP shards over, as it appears in ShardSpec placements.
inline constexpr const char* kShardMeshDim = "dp_shard_cp";

struct ShardedParameter {
  at::Tensor local;          // the live fp32 shard [local_rows, ...] (unpadded)
  tensor::ShardSpec spec;    // global shape; [dp_shard_cp: Shard(0)] when sharded
  tensor::GroupCoord shard;  // shard group size and this rank's place in it
  int64_t dim0_offset = 0;   // first global row of `local` (torch.chunk offset)
};

// Parameters that no fully_shard group manages are reported whole (no
// placements, group size 1).
std::vector<std::pair<std::string, ShardedParameter>> sharded_state_dict(torch::nn::Module& root);

// Every parameter as a full fp32 tensor on every rank. Collective over each
// group's shard group (every rank must call it).
std::vector<std::pair<std::string, at::Tensor>> full_state_dict(torch::nn::Module& root);

// The same, one parameter at a time: `visit(name, full)` is called in
// named_parameters() order with a tensor valid only during the call, so no
// more than one full parameter exists beside the shards (a decoding copy of
// the weights is filled this way, policy/decoding_model.h). Collective as
// full_state_dict.
void for_each_full_parameter(torch::nn::Module& root,
                             const std::function<void(const std::string&, const at::Tensor&)>& visit);

// Copies each full tensor's rows of this rank into the shards (and whole
// tensors into unmanaged parameters). Names missing from `full` are an error.
void load_full_state_dict(torch::nn::Module& root,
                          const std::vector<std::pair<std::string, at::Tensor>>& full);

}  // namespace tessel::fsdp
