#include "train/rank_files.h"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/confined_file.h"
#include "train/shard_loading.h"

namespace tessel::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A rank file's header fields (its rows' offsets, its tp coordinate), checked
// as metadata.json is: they come from the checkpoint too.
void read_rank_header(const io::SafetensorsFile& file, int tp_size, RankFiles& rf) {
  const auto& header = file.metadata();
  const std::string path = file.path().string();
  const auto it = header.find("dim0_offsets");
  if (it == header.end()) {
    throw UsageError(
        fmt::format("{}: no dim0_offsets in the header: not a tessel checkpoint shard", path));
  }
  const json offsets = json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  std::map<std::string, int64_t> rows;
  if (offsets.is_object()) {
    for (const auto& [name, row] : offsets.items()) {
      // An unsigned value too large for int64 reads as negative: refused too.
      if (!row.is_number_integer() || row.get<int64_t>() < 0) break;
      rows[name] = row.get<int64_t>();
    }
  }
  if (!offsets.is_object() || rows.size() != offsets.size()) {
    throw UsageError(
        fmt::format("{}: the header's dim0_offsets is not a JSON object of row offsets: the file "
                    "is damaged or not a tessel checkpoint shard",
                    path));
  }
  rf.offsets.push_back(std::move(rows));
  int tp_rank = 0;
  if (const auto tp = header.find("tp_rank"); tp != header.end()) {
    const auto [end, ec] =
        std::from_chars(tp->second.data(), tp->second.data() + tp->second.size(), tp_rank);
    if (ec != std::errc() || end != tp->second.data() + tp->second.size() || tp_rank < 0 ||
        tp_rank >= tp_size) {
      throw UsageError(fmt::format(
          "{}: the header's tp_rank is '{}', expected 0 to {} (metadata.json's tp_size {})", path,
          tp->second, tp_size - 1, tp_size));
    }
  }
  rf.tp_ranks.push_back(tp_rank);
}

}  // namespace

RankFiles open_rank_files(const fs::path& step_dir, const CheckpointMetadata& meta) {
  RankFiles rf;
  const std::string where = fmt::format("checkpoint {}", step_dir.string());
  for (int r = 0; r < meta.world_size; ++r) {
    rf.files.push_back(io::SafetensorsFile::open(
        io::confined_file(step_dir, fmt::format("rank_{}.safetensors", r), where)));
    read_rank_header(rf.files.back(), meta.tp_size, rf);
  }
  rf.tp_size = meta.tp_size;
  for (const auto& [name, split] : meta.tp_sharded) {
    rf.tp_sharded.emplace(
        name, parallel::TpParam{
                  tensor::ShardSpec(meta.shapes.at(name),
                                    {{parallel::kTpMeshDim, tensor::Layout::shard(split.dim)}}),
                  split.packed_parts, "checkpoint"});
  }
  return rf;
}

void fill_from_rank_files(const RankFiles& rf, const std::string& kind, const std::string& name,
                          const std::vector<int64_t>& global_shape, const tensor::BoxMap& dst_map,
                          const at::Tensor& dst, const fs::path& step_dir) {
  const std::string key = kind + "/" + name;
  const auto tp = rf.tp_sharded.find(name);
  int64_t filled = 0;
  for (size_t r = 0; r < rf.files.size(); ++r) {
    const io::SafetensorsFile& file = rf.files[r];
    if (!file.contains(key)) continue;
    const tensor::BoxMap piece = tp != rf.tp_sharded.end()
                                     ? parallel::local_piece_map(tp->second, rf.tp_size, rf.tp_ranks[r])
                                     : tensor::whole_tensor_map(global_shape);
    const auto& shape = file.info(key).shape;
    const tensor::BoxMap src_map =
        shape.empty() ? piece : tensor::narrow_local_rows(piece, rf.offsets[r].at(name), shape[0]);
    for (const auto& d : dst_map) {
      for (const auto& src : src_map) {
        const auto o = tensor::overlap(d, src);
        if (!o) continue;
        file.read_box_into(key, o->src_offset, box_view(dst, o->dst_offset, o->shape));
        filled += tensor::BoxSegment{o->global_offset, o->dst_offset, o->shape}.numel();
      }
    }
  }
  if (filled < tensor::map_numel(dst_map)) {
    throw Error(fmt::format("checkpoint {}: the rank files hold only {} of the {} elements of '{}' this rank needs; "
                            "a rank file is missing or was not written by this checkpoint's run",
                            step_dir.string(), filled, tensor::map_numel(dst_map), key));
  }
}

}  // namespace tessel::train
