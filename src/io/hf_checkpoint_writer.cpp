#include "io/hf_checkpoint_writer.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <set>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/hf_checkpoint.h"

namespace tessel::io {
namespace {

uint64_t nbytes(const at::Tensor& t) {
  return static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(t.element_size());
}

// Consecutive runs of tensors, each run within the byte budget where possible.
std::vector<NamedTensors> split_into_shards(const NamedTensors& tensors, uint64_t max_bytes) {
  std::vector<NamedTensors> shards(1);
  uint64_t current = 0;
  for (const auto& entry : tensors) {
    const uint64_t bytes = nbytes(entry.second);
    if (!shards.back().empty() && current + bytes > max_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(entry);
    current += bytes;
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
  const auto shards = split_into_shards(tensors, max_shard_bytes);
  if (shards.size() == 1) {
    save_safetensors(dir / kHfSafetensorsFile, tensors, metadata, produce);
    remove_stale_files(dir, {kHfSafetensorsFile});
    return;
  }

  std::set<std::string> written{kHfSafetensorsIndexFile};
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  std::map<std::string, std::string> sorted_map;  // HF writes the weight_map sorted
  uint64_t total_size = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string file =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    save_safetensors(dir / file, shards[i], metadata, produce);
    written.insert(file);
    for (const auto& [name, tensor] : shards[i]) {
      sorted_map[name] = file;
      total_size += nbytes(tensor);
    }
  }
  for (const auto& [name, file] : sorted_map) weight_map[name] = file;
  nlohmann::ordered_json index = {{"metadata", {{"total_size", total_size}}},
                                  {"weight_map", weight_map}};
  write_file_atomically(dir / kHfSafetensorsIndexFile, index.dump(2) + "\n");
  remove_stale_files(dir, written);
}

}  // namespace tessel::io
