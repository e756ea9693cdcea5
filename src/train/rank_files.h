// Reading the rank files of a checkpoint step (layout: train/checkpoint.h):
// each rank_<r>.safetensors holds, per tensor, the saving rank's rows of its
// tp piece; its header says where those rows start (dim0_offsets) and which
// tp piece it is (tp_rank), metadata.json which parameters tp split and how.
// From these the box of the global tensor each file holds is known, so any
// box of any tensor is read from exactly the files that cover it, touching
// only the overlapping bytes: how a run resumes on another mesh (each rank
// its own rows), how load_full_tensors assembles whole tensors and how
// `tessel convert` streams a checkpoint into a Hugging Face directory one
// slice at a time. The header fields come from the checkpoint, untrusted:
// they are checked as metadata.json is (checkpoint_metadata.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors_file.h"
#include "parallel/param_registry.h"
#include "tensor/box_map.h"
#include "train/checkpoint_metadata.h"

namespace tessel::train {

struct RankFiles {
  std::vector<io::SafetensorsFile> files;
  std::vector<std::map<std::string, int64_t>> offsets;  // per rank: name -> first row of its tp piece
  std::vector<int> tp_ranks;                            // per rank: its coordinate in the tp group
  int tp_size = 1;
  std::map<std::string, parallel::TpParam> tp_sharded;  // the parameters split over tp
};

// Opens (maps) rank_0 .. rank_<world_size - 1> of `step_dir` and checks their
// headers; reads no tensor data. tessel::UsageError naming the file when a
// header is not a tessel shard's; tessel::Error when a file is missing.
RankFiles open_rank_files(const std::filesystem::path& step_dir, const CheckpointMetadata& meta);

// Fills `dst` (laid out as `dst_map`: which boxes of the global tensor of
// `global_shape` it holds, and where) with the elements of `kind/name`
// ("model/<name>", "exp_avg/<name>", ...) the rank files hold, reading only
// the overlaps, converted to dst's dtype. tessel::Error naming the step and
// the tensor when the files hold fewer elements than `dst_map` asks for.
void fill_from_rank_files(const RankFiles& rf, const std::string& kind, const std::string& name,
                          const std::vector<int64_t>& global_shape, const tensor::BoxMap& dst_map,
                          const at::Tensor& dst, const std::filesystem::path& step_dir);

}  // namespace tessel::train
