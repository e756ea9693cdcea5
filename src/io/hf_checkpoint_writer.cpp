#include "io/hf_checkpoint_writer.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <set>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/hf_checkpoint.h"
#include "io/hf_export_layout.h"

namespace tessel::io {
namespace {

uint64_t nbytes(const at::Tensor& t) {
  return static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(t.element_size());
}

// save_pretrained's split of the tensors (io/hf_export_layout.h).
std::vector<NamedTensors> shards_of(const NamedTensors& tensors, uint64_t max_bytes) {
  std::vector<uint64_t> bytes;
  for (const auto& entry : tensors) bytes.push_back(nbytes(entry.second));
  std::vector<NamedTensors> shards;
  for (const auto& run : split_into_shards(bytes, max_bytes)) {
    shards.emplace_back();
    for (size_t i : run) shards.back().push_back(tensors[i]);
  }
  return shards;
}

// Files of an earlier save that the new layout does not contain.
void remove_stale_files(const std::filesystem::path& dir, const std::set<std::string>& keep) {
  static const std::regex shard_name(R"(model-\d{5}-of-\d{5}\.safetensors)");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const bool ours = name == kHfSafetensorsFile || name == kHfSafetensorsIndexFile ||
                      std::regex_match(name, shard_name);
    if (ours && keep.count(name) == 0) std::filesystem::remove(entry.path());
  }
}

}  // namespace

void save_hf_checkpoint(const std::filesystem::path& dir, const NamedTensors& tensors,
                        const std::string& config_json, uint64_t max_shard_bytes,
                        const TensorProducer& produce) {
  TESSEL_CHECK(max_shard_bytes > 0, "{}: max_shard_bytes must be positive", dir.string());
  // Fail before any file is written, not after some shards are.
  check_named_tensors(dir, tensors);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  TESSEL_CHECK(!ec, "{}: cannot create the checkpoint directory: {}", dir.string(), ec.message());

  if (!config_json.empty()) {
    bool is_object = false;
    try {
      is_object = nlohmann::json::parse(config_json).is_object();
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: the model config to write is not valid JSON ({})",
                              (dir / kHfConfigFile).string(), e.what()));
    }
    TESSEL_CHECK(is_object, "{}: the model config to write must be a JSON object",
                 (dir / kHfConfigFile).string());
    write_file_atomically(dir / kHfConfigFile, config_json);
  }

  const std::map<std::string, std::string> metadata{{"format", "pt"}};
  const auto shards = shards_of(tensors, max_shard_bytes);
  if (shards.size() == 1) {
    save_safetensors(dir / kHfSafetensorsFile, tensors, metadata, produce);
    remove_stale_files(dir, {kHfSafetensorsFile});
    return;
  }

  std::set<std::string> written{kHfSafetensorsIndexFile};
  std::map<std::string, std::string> weight_map;  // HF writes the weight_map sorted
  uint64_t total_size = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string file = shard_file_name(i, shards.size());
    save_safetensors(dir / file, shards[i], metadata, produce);
    written.insert(file);
    for (const auto& [name, tensor] : shards[i]) {
      weight_map[name] = file;
      total_size += nbytes(tensor);
    }
  }
  write_file_atomically(dir / kHfSafetensorsIndexFile, hf_index_json(total_size, weight_map));
  remove_stale_files(dir, written);
}

}  // namespace tessel::io
