// A checkpoint step's metadata.json, read and checked in one place (layout:
// train/checkpoint.h). A checkpoint is untrusted input (downloaded, shared,
// restored from storage), so the reader trusts nothing it did not check
// here: every field has its type and range, every parameter split over tp
// names a recorded shape, and every file name in "files" is a plain file
// name inside the step directory (io/confined_file.h). Anything else is a
// tessel::UsageError naming the file, the field and the value, before the
// reader opens any other file. Free of libtorch, so the fuzz target
// (fuzz/checkpoint_metadata_fuzz.cpp) builds it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/sampler.h"
#include "io/file_digest.h"

namespace tessel::train {

// Every file of a step with its size and xxHash64 ("files",
// train/checkpoint_manifest.h): file name inside the step directory -> what
// was written.
using CheckpointManifest = std::map<std::string, io::FileDigest>;

// The manifest as JSON text for metadata.json's "files", and back. `source`
// names the file it came from in messages.
std::string manifest_to_json(const CheckpointManifest& manifest);
CheckpointManifest manifest_from_json(const std::string& json_text,
                                      const std::string& source = "a checkpoint's metadata.json");

// How the saving run split a parameter over tp: along `dim` of its global
// shape, in `packed_parts` equal parts each split apart (fused gate || up).
struct TpSplit {
  int64_t dim = 0;
  int packed_parts = 1;
};

inline constexpr const char* kCheckpointFormat =
    "tessel-checkpoint-2";  // 2: each element in one rank file

// The files of the run's model kept in the step beside the weights
// (tokenizer, chat template, generation config: train/model_files.h) and
// the directories they were copied from, absolute ("" for a preset).
struct CarriedModelFiles {
  std::string model_dir;
  std::string tokenizer_dir;
  std::vector<std::string> names;  // plain file names in the step directory, each in "files"
};

struct CheckpointMetadata {
  int64_t step = 0;
  int world_size = 1;  // rank_0.safetensors .. rank_<world_size - 1>.safetensors
  int tp_size = 1;
  std::string mesh;  // the saving run's layout, as DeviceMesh describes it
  int64_t optimizer_step = 0;
  bool has_optimizer = false;
  data::SamplerState sampler;
  std::map<std::string, double> metrics;               // a metric that was NaN (null) is absent
  std::map<std::string, std::vector<int64_t>> shapes;  // every parameter's global shape
  std::map<std::string, TpSplit> tp_sharded;           // the parameters split over tp
  std::optional<CheckpointManifest> files;  // absent in checkpoints saved before the list
  // The other sets of shards the rank files hold beside "model" (ShardSets
  // of train/checkpoint.h, e.g. "reference"); absent: none.
  std::vector<std::string> shard_sets;
  // "model_files"; empty in checkpoints saved before tessel kept them.
  CarriedModelFiles model_files;
};

// metadata.json's top level when it is a JSON object with the fields above;
// tessel::UsageError "<source>: <what is wrong>" otherwise.
CheckpointMetadata parse_checkpoint_metadata(const std::string& json_text,
                                             const std::string& source);

// Only "files" (absent: nullopt), for the check of the files before a load;
// the same errors for the JSON and for "files".
std::optional<CheckpointManifest> manifest_of_metadata(const std::string& json_text,
                                                       const std::string& source);

}  // namespace tessel::train
