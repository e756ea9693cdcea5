// A Hugging Face model directory as a single source of tensors: either one
// `model.safetensors` or a sharded set described by
// `model.safetensors.index.json` ({"metadata": {...}, "weight_map": {tensor
// name: shard file}}). Tensors are read by name with the same calls as
// SafetensorsFile, whichever shard holds them, so model loading code does not
// care how the checkpoint was split. As in transformers, a single
// model.safetensors wins over an index when both are present.
//
// open() validates everything up front: every shard named by the index must
// exist and be a valid safetensors file, and must hold the tensors the index
// assigns to it. Shards are memory-mapped, so opening costs no data reads.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors_file.h"

namespace tessel::io {

inline constexpr const char* kHfSafetensorsFile = "model.safetensors";
inline constexpr const char* kHfSafetensorsIndexFile = "model.safetensors.index.json";
inline constexpr const char* kHfConfigFile = "config.json";

class HfCheckpoint {
 public:
  // Throws tessel::Error naming the directory or file when the directory has
  // neither file, the index is malformed, a shard file is missing or invalid,
  // or the index names a tensor its shard does not hold.
  static HfCheckpoint open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path config_path() const { return dir_ / kHfConfigFile; }
  bool sharded() const { return sharded_; }
  // The files tensors are read from (one, or the shards in name order).
  const std::vector<SafetensorsFile>& files() const { return files_; }

  // All tensor names, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  // Throws tessel::Error naming the checkpoint, the tensor and the closest names.
  const TensorInfo& info(const std::string& name) const;
  const SafetensorsFile& file_of(const std::string& name) const;

  // As SafetensorsFile's, on whichever file holds the tensor.
  at::Tensor load(const std::string& name) const;
  std::map<std::string, at::Tensor> load_many(const std::vector<std::string>& names) const;
  at::Tensor load_slice(const std::string& name, int64_t dim, int64_t start, int64_t length) const;
  void read_box_into(const std::string& name, const std::vector<int64_t>& offset, const at::Tensor& dst) const;
  at::Tensor view(const std::string& name) const;
  at::Tensor view_slice(const std::string& name, int64_t start, int64_t length) const;

 private:
  std::filesystem::path dir_;
  std::filesystem::path source_;  // model.safetensors or the index, for messages
  bool sharded_ = false;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t, std::less<>> file_index_;  // tensor name -> files_ position
};

}  // namespace tessel::io
