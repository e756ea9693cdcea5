#include "io/hf_export_layout.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/hf_checkpoint.h"
#include "io/safetensors_dtype.h"
#include "io/safetensors_writer.h"

namespace tessel::io {

std::vector<std::vector<size_t>> split_into_shards(const std::vector<uint64_t>& bytes, uint64_t max_shard_bytes) {
  std::vector<std::vector<size_t>> shards(1);
  uint64_t current = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (!shards.back().empty() && current + bytes[i] > max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(i);
    current += bytes[i];
  }
  return shards;
}

std::string shard_file_name(size_t index, size_t count) {
  if (count <= 1) return kHfSafetensorsFile;
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

std::string hf_index_json(uint64_t total_size, const std::map<std::string, std::string>& weight_map) {
  nlohmann::ordered_json map = nlohmann::ordered_json::object();
  for (const auto& [name, file] : weight_map) map[name] = file;
  const nlohmann::ordered_json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", map}};
  return index.dump(2) + "\n";
}

HfExportLayout::HfExportLayout(std::vector<ExportTensor> tensors, c10::ScalarType dtype, uint64_t max_shard_bytes)
    : dtype_(dtype), tensors_(std::move(tensors)) {
  TESSEL_CHECK(max_shard_bytes > 0, "a Hugging Face export needs a positive shard size");
  const auto itemsize = static_cast<uint64_t>(safetensors_itemsize(dtype));
  std::vector<uint64_t> bytes;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const ExportTensor& t = tensors_[i];
    TESSEL_CHECK(!t.name.empty() && t.name != "__metadata__", "a Hugging Face export cannot hold a tensor named '{}'",
                 t.name);
    TESSEL_CHECK(position_.emplace(t.name, i).second, "tensor '{}' is given twice to a Hugging Face export", t.name);
    uint64_t n = itemsize;
    for (int64_t d : t.shape) {
      TESSEL_CHECK(d >= 0, "tensor '{}' has a negative size", t.name);
      n *= static_cast<uint64_t>(d);
    }
    bytes.push_back(n);
    total_bytes_ += n;
  }
  const auto shards = split_into_shards(bytes, max_shard_bytes);
  places_.resize(tensors_.size());
  for (size_t f = 0; f < shards.size(); ++f) {
    std::vector<HeaderEntry> entries;
    uint64_t cursor = 0;
    for (size_t i : shards[f]) {
      entries.push_back({tensors_[i].name, dtype, tensors_[i].shape, cursor, cursor + bytes[i]});
      cursor += bytes[i];
    }
    ExportFile file{shard_file_name(f, shards.size()), safetensors_header_bytes(entries, {{"format", "pt"}}), 0};
    file.bytes = file.header.size() + cursor;
    for (size_t k = 0; k < shards[f].size(); ++k) {
      const size_t i = shards[f][k];
      places_[i] = ExportPlace{f, file.header.size() + entries[k].begin, bytes[i]};
    }
    files_.push_back(std::move(file));
  }
}

const ExportTensor& HfExportLayout::tensor(const std::string& name) const {
  const auto it = position_.find(name);
  TESSEL_CHECK(it != position_.end(), "tensor '{}' is not part of this Hugging Face export", name);
  return tensors_[it->second];
}

const ExportPlace& HfExportLayout::place(const std::string& name) const {
  const auto it = position_.find(name);
  TESSEL_CHECK(it != position_.end(), "tensor '{}' is not part of this Hugging Face export", name);
  return places_[it->second];
}

std::string HfExportLayout::index_json() const {
  if (!sharded()) return "";
  std::map<std::string, std::string> weight_map;
  for (size_t i = 0; i < tensors_.size(); ++i) weight_map[tensors_[i].name] = files_[places_[i].file].name;
  return hf_index_json(total_bytes_, weight_map);
}

}  // namespace tessel::io
