#include "io/hf_checkpoint.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/confined_file.h"
#include "io/name_hints.h"

namespace tessel::io {
namespace {

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  TESSEL_CHECK(in.good(), "{}: cannot open for reading", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({})", path.string(), e.what()));
  }
}

// weight_map of an index file: tensor name -> shard file name.
std::map<std::string, std::string> read_weight_map(const std::filesystem::path& index_path) {
  const auto index = read_json_file(index_path);
  TESSEL_CHECK(index.is_object() && index.contains("weight_map") && index["weight_map"].is_object(),
               "{}: expected a JSON object with a 'weight_map' object (tensor name -> shard "
               "file); the index is corrupt",
               index_path.string());
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    TESSEL_CHECK(shard.is_string(),
                 "{}: weight_map entry for tensor '{}' is a JSON {}, expected "
                 "a shard file name",
                 index_path.string(), name, shard.type_name());
    weight_map.emplace(name, shard.get<std::string>());
  }
  return weight_map;
}

// Where the files of `dir` may lead when they are symbolic links: `dir`
// itself, except in a Hugging Face hub cache, which keeps a model as
// <repo>/snapshots/<revision>/<file>, each file a link into <repo>/blobs/.
std::filesystem::path link_root(const std::filesystem::path& dir) {
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::weakly_canonical(dir, ec);
  if (ec) return dir;
  const std::filesystem::path snapshots = real.parent_path();
  const std::filesystem::path repo = snapshots.parent_path();
  if (snapshots.filename() == "snapshots" && std::filesystem::is_directory(repo / "blobs", ec)) {
    return repo;
  }
  return dir;
}

}  // namespace

HfCheckpoint HfCheckpoint::open(const std::filesystem::path& dir) {
  HfCheckpoint ckpt;
  ckpt.dir_ = dir;
  TESSEL_CHECK(std::filesystem::is_directory(dir),
               "{}: not a directory (expected a Hugging Face model directory with {} or {})",
               dir.string(), kHfSafetensorsFile, kHfSafetensorsIndexFile);

  // Every file is checked with io/confined_file.h before it is opened: the
  // shard names come from the index, and any file may be a link.
  const std::filesystem::path root = link_root(dir);
  const std::string in_dir = fmt::format("Hugging Face directory {}", dir.string());
  const auto single = dir / kHfSafetensorsFile;
  const auto index_path = dir / kHfSafetensorsIndexFile;
  if (std::filesystem::exists(single)) {
    ckpt.source_ = confined_file(dir, kHfSafetensorsFile, in_dir, root);
    ckpt.files_.push_back(SafetensorsFile::open(single));
    for (const auto& t : ckpt.files_[0].tensors()) ckpt.file_index_.emplace(t.name, 0);
    return ckpt;
  }
  TESSEL_CHECK(std::filesystem::exists(index_path),
               "{}: has neither {} nor {}; is this a Hugging Face safetensors checkpoint? (.bin "
               "checkpoints must be converted to safetensors first)",
               dir.string(), kHfSafetensorsFile, kHfSafetensorsIndexFile);

  ckpt.source_ = confined_file(dir, kHfSafetensorsIndexFile, in_dir, root);
  ckpt.sharded_ = true;
  const auto weight_map = read_weight_map(index_path);
  // Every shard is checked (name, link, presence) before any is opened.
  std::map<std::string, size_t> shard_position;
  for (const auto& [name, shard] : weight_map) {
    auto [it, added] = shard_position.emplace(shard, shard_position.size());
    if (!added) continue;
    const auto shard_path = confined_file(
        dir, shard,
        fmt::format("{}: the weight_map entry of tensor '{}'", index_path.string(), name), root);
    TESSEL_CHECK(std::filesystem::exists(shard_path),
                 "{}: shard file {} (holding tensor '{}') is missing; the download or copy of "
                 "the checkpoint is incomplete",
                 index_path.string(), shard_path.string(), name);
  }
  // Shards in name order: model-00001-of-N first, the order HF reads them in.
  size_t position = 0;
  for (auto& [shard, pos] : shard_position) {
    ckpt.files_.push_back(SafetensorsFile::open(dir / shard));
    pos = position++;
  }
  for (const auto& [name, shard] : weight_map) {
    const size_t pos = shard_position.at(shard);
    const auto& file = ckpt.files_[pos];
    if (!file.contains(name)) {
      throw Error(
          fmt::format("{}: weight_map puts tensor '{}' in {}, but that file has no such "
                      "tensor ({}); the index and the shards do not match",
                      index_path.string(), name, file.path().string(),
                      describe_available_names(file.names(), name)));
    }
    ckpt.file_index_.emplace(name, pos);
  }
  return ckpt;
}

std::vector<std::string> HfCheckpoint::names() const {
  std::vector<std::string> out;
  out.reserve(file_index_.size());
  for (const auto& entry : file_index_) out.push_back(entry.first);
  return out;
}

bool HfCheckpoint::contains(const std::string& name) const { return file_index_.count(name) > 0; }

const SafetensorsFile& HfCheckpoint::file_of(const std::string& name) const {
  const auto it = file_index_.find(name);
  if (it == file_index_.end()) {
    throw Error(fmt::format("{}: no tensor named '{}' in this checkpoint ({})", source_.string(),
                            name, describe_available_names(names(), name)));
  }
  return files_[it->second];
}

const TensorInfo& HfCheckpoint::info(const std::string& name) const {
  return file_of(name).info(name);
}

at::Tensor HfCheckpoint::load(const std::string& name) const { return file_of(name).load(name); }

std::map<std::string, at::Tensor> HfCheckpoint::load_many(
    const std::vector<std::string>& names) const {
  std::map<std::string, at::Tensor> out;
  for (const auto& name : names) out.emplace(name, load(name));
  return out;
}

at::Tensor HfCheckpoint::load_slice(const std::string& name, int64_t dim, int64_t start,
                                    int64_t length) const {
  return file_of(name).load_slice(name, dim, start, length);
}

at::Tensor HfCheckpoint::view(const std::string& name) const { return file_of(name).view(name); }

void HfCheckpoint::read_box_into(const std::string& name, const std::vector<int64_t>& offset,
                                 const at::Tensor& dst) const {
  file_of(name).read_box_into(name, offset, dst);
}

at::Tensor HfCheckpoint::view_slice(const std::string& name, int64_t start, int64_t length) const {
  return file_of(name).view_slice(name, start, length);
}

}  // namespace tessel::io
