#include "train/checkpoint_metadata.h"

#include <fmt/format.h>

#include <charconv>
#include <limits>
#include <utility>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/confined_file.h"
#include "io/xxhash64.h"

namespace tessel::train {

using nlohmann::json;

namespace {

// Checks one metadata.json; every refusal names the file (`source`).
class MetadataReader {
 public:
  explicit MetadataReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void refuse(const std::string& what) const {
    throw UsageError(fmt::format("{}: {}", source_, what));
  }

  json parse_object(const std::string& text) const {
    json j;
    try {
      j = json::parse(text);
    } catch (const json::exception& e) {
      throw UsageError(fmt::format("{} is not valid JSON ({})", source_, e.what()));
    }
    if (!j.is_object()) {
      throw UsageError(
          fmt::format("{} is not a checkpoint's metadata: its top level is a JSON {}, "
                      "not an object",
                      source_, j.type_name()));
    }
    return j;
  }

  // A value as the file has it, cut short for a message.
  static std::string shown(const json& v) {
    std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > 80) text = text.substr(0, 77) + "...";
    return text;
  }

  // object[key]; `owner` names the object in the message ("": the top level).
  const json& field(const json& object, const char* key, const std::string& owner = "") const {
    const auto it = object.find(key);
    if (it == object.end())
      refuse(fmt::format("{}has no \"{}\"", owner.empty() ? "" : owner + " ", key));
    return *it;
  }

  // `v` (`what`, for the message) as an integer in [lo, hi].
  int64_t integer(const json& v, const std::string& what, int64_t lo, int64_t hi) const {
    bool ok = v.is_number_integer();
    int64_t x = 0;
    if (ok && v.is_number_unsigned()) {
      const auto u = v.get<uint64_t>();
      ok = u <= static_cast<uint64_t>(hi);
      x = static_cast<int64_t>(u);
    } else if (ok) {
      x = v.get<int64_t>();
    }
    if (!ok || x < lo || x > hi) {
      refuse(fmt::format("{} is {}, expected an integer from {} to {}", what, shown(v), lo, hi));
    }
    return x;
  }

  const json& object(const json& v, const std::string& what) const {
    if (!v.is_object()) refuse(fmt::format("{} is {}, expected a JSON object", what, shown(v)));
    return v;
  }

  std::vector<int64_t> shape(const std::string& name, const json& v) const {
    const std::string what = fmt::format("the shape of '{}' in \"shapes\"", name);
    if (!v.is_array()) refuse(fmt::format("{} is {}, expected a list of sizes", what, shown(v)));
    std::vector<int64_t> out;
    int64_t numel = 1;
    for (const json& d : v) {
      out.push_back(
          integer(d, what + " holds a size that", 0, std::numeric_limits<int64_t>::max()));
      if (__builtin_mul_overflow(numel, out.back(), &numel)) {
        refuse(fmt::format("{} is {}: more elements than a tensor can hold", what, shown(v)));
      }
    }
    return out;
  }

  CheckpointManifest manifest(const json& files) const {
    object(files, "\"files\"");
    CheckpointManifest out;
    for (const auto& [name, d] : files.items()) {
      // Before anything else: the name is the one thing in the file that
      // becomes a path (io/confined_file.h).
      if (const std::string why = io::why_not_a_plain_file_name(name); !why.empty()) {
        refuse(fmt::format(
            "\"files\" names {}, which is not a file name inside the step directory: {}",
            io::quoted_file_name(name), why));
      }
      const std::string what = fmt::format("the \"files\" entry {}", io::quoted_file_name(name));
      object(d, what);
      const uint64_t bytes = static_cast<uint64_t>(integer(
          field(d, "bytes", what), what + "'s \"bytes\"", 0, std::numeric_limits<int64_t>::max()));
      const json& hex = field(d, "xxh64", what);
      uint64_t hash = 0;
      const std::string text = hex.is_string() ? hex.get<std::string>() : "";
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), hash, 16);
      if (!hex.is_string() || text.size() != 16 || ec != std::errc() ||
          end != text.data() + text.size()) {
        refuse(fmt::format("{}'s \"xxh64\" is {}, not 16 hex digits", what, shown(hex)));
      }
      out[name] = io::FileDigest{bytes, hash};
    }
    return out;
  }

 private:
  std::string source_;
};

}  // namespace

std::string manifest_to_json(const CheckpointManifest& manifest) {
  json out = json::object();
  for (const auto& [name, d] : manifest) {
    out[name] = {{"bytes", d.bytes}, {"xxh64", io::hash_hex(d.xxh64)}};
  }
  return out.dump();
}

CheckpointManifest manifest_from_json(const std::string& json_text, const std::string& source) {
  const MetadataReader reader(source);
  return reader.manifest(reader.parse_object(json_text));
}

std::optional<CheckpointManifest> manifest_of_metadata(const std::string& json_text,
                                                       const std::string& source) {
  const MetadataReader reader(source);
  const json meta = reader.parse_object(json_text);
  const auto files = meta.find("files");
  if (files == meta.end()) return std::nullopt;
  return reader.manifest(*files);
}

CheckpointMetadata parse_checkpoint_metadata(const std::string& json_text,
                                             const std::string& source) {
  const MetadataReader reader(source);
  const json meta = reader.parse_object(json_text);
  constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();

  const json& format = reader.field(meta, "format");
  if (format != kCheckpointFormat) {
    reader.refuse(
        fmt::format("\"format\" is {}, expected \"{}\": not a checkpoint this tessel wrote",
                    MetadataReader::shown(format), kCheckpointFormat));
  }
  CheckpointMetadata out;
  // "files" first: its names are checked before anything else is read.
  if (const auto files = meta.find("files"); files != meta.end())
    out.files = reader.manifest(*files);
  out.step = reader.integer(reader.field(meta, "step"), "\"step\"", 0, kInt64Max);
  out.world_size = static_cast<int>(
      reader.integer(reader.field(meta, "world_size"), "\"world_size\"", 1, kIntMax));
  const json tp_size = meta.value("tp_size", json(1));
  out.tp_size = static_cast<int>(reader.integer(tp_size, "\"tp_size\"", 1, out.world_size));
  if (out.world_size % out.tp_size != 0) {
    reader.refuse(fmt::format("\"tp_size\" {} does not divide \"world_size\" {}", out.tp_size,
                              out.world_size));
  }
  if (const auto mesh = meta.find("mesh"); mesh != meta.end()) {
    if (!mesh->is_string())
      reader.refuse(fmt::format("\"mesh\" is {}, expected a string", MetadataReader::shown(*mesh)));
    out.mesh = mesh->get<std::string>();
  }
  out.optimizer_step =
      reader.integer(reader.field(meta, "optimizer_step"), "\"optimizer_step\"", 0, kInt64Max);
  const json& has_optimizer = reader.field(meta, "has_optimizer");
  if (!has_optimizer.is_boolean()) {
    reader.refuse(fmt::format("\"has_optimizer\" is {}, expected true or false",
                              MetadataReader::shown(has_optimizer)));
  }
  out.has_optimizer = has_optimizer.get<bool>();

  const json& sampler = reader.object(reader.field(meta, "sampler"), "\"sampler\"");
  for (const char* key : {"epoch", "position", "dataset_size"}) {
    reader.integer(reader.field(sampler, key, "\"sampler\""),
                   fmt::format("\"sampler\"'s \"{}\"", key), 0, kInt64Max);
  }
  const json& seed = reader.field(sampler, "seed", "\"sampler\"");
  if (!seed.is_number_unsigned()) {
    reader.refuse(fmt::format("\"sampler\"'s \"seed\" is {}, expected an integer from 0 to {}",
                              MetadataReader::shown(seed), std::numeric_limits<uint64_t>::max()));
  }
  out.sampler = data::SamplerState::from_json(sampler.dump());

  const json metrics = meta.value("metrics", json::object());
  for (const auto& [name, value] : reader.object(metrics, "\"metrics\"").items()) {
    if (value.is_null()) continue;  // NaN is stored as null
    if (!value.is_number()) {
      reader.refuse(fmt::format("the metric '{}' in \"metrics\" is {}, expected a number or null",
                                name, MetadataReader::shown(value)));
    }
    out.metrics[name] = value.get<double>();
  }

  for (const auto& [name, shape] :
       reader.object(reader.field(meta, "shapes"), "\"shapes\"").items()) {
    out.shapes[name] = reader.shape(name, shape);
  }
  const json tp_sharded = meta.value("tp_sharded", json::object());
  for (const auto& [name, split] : reader.object(tp_sharded, "\"tp_sharded\"").items()) {
    const auto shape = out.shapes.find(name);
    if (shape == out.shapes.end()) {
      reader.refuse(
          fmt::format("\"tp_sharded\" names '{}', which has no shape in \"shapes\"", name));
    }
    const std::string what = fmt::format("\"tp_sharded\"'s '{}'", name);
    reader.object(split, what);
    const auto rank = static_cast<int64_t>(shape->second.size());
    if (rank == 0) reader.refuse(fmt::format("{}: a scalar cannot be split over tp", what));
    TpSplit s;
    s.dim = reader.integer(reader.field(split, "dim", what), what + " \"dim\"", 0, rank - 1);
    const int64_t extent = shape->second[static_cast<size_t>(s.dim)];
    s.packed_parts = static_cast<int>(reader.integer(reader.field(split, "packed_parts", what),
                                                     what + " \"packed_parts\"", 1, kIntMax));
    if (extent % s.packed_parts != 0) {
      reader.refuse(fmt::format("{}: \"packed_parts\" {} does not divide its size {} along dim {}",
                                what, s.packed_parts, extent, s.dim));
    }
    out.tp_sharded[name] = s;
  }
  const json shard_sets = meta.value("shard_sets", json::array());
  if (!shard_sets.is_array()) {
    reader.refuse(fmt::format("\"shard_sets\" is {}, expected a list of names", MetadataReader::shown(shard_sets)));
  }
  for (const json& kind : shard_sets) {
    const bool plain = kind.is_string() && !kind.get<std::string>().empty() &&
                       kind.get<std::string>().find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == std::string::npos;
    if (!plain || kind == "model" || kind == "exp_avg" || kind == "exp_avg_sq") {
      reader.refuse(fmt::format("\"shard_sets\" holds {}, expected names of lowercase letters and '_' other than "
                                "model, exp_avg and exp_avg_sq",
                                MetadataReader::shown(kind)));
    }
    out.shard_sets.push_back(kind.get<std::string>());
  }
  if (const auto carried = meta.find("model_files"); carried != meta.end()) {
    const json& m = reader.object(*carried, "\"model_files\"");
    for (const auto& [key, field] : {std::pair{"model_dir", &out.model_files.model_dir},
                                     std::pair{"tokenizer_dir", &out.model_files.tokenizer_dir}}) {
      const json& v = reader.field(m, key, "\"model_files\"");
      if (!v.is_string()) {
        reader.refuse(fmt::format("\"model_files\"'s \"{}\" is {}, expected a directory name", key,
                                  MetadataReader::shown(v)));
      }
      *field = v.get<std::string>();
    }
    const json& names = reader.field(m, "names", "\"model_files\"");
    if (!names.is_array()) {
      reader.refuse(fmt::format("\"model_files\"'s \"names\" is {}, expected a list of file names",
                                MetadataReader::shown(names)));
    }
    for (const json& name : names) {
      const std::string text = name.is_string() ? name.get<std::string>() : "";
      if (const std::string why = io::why_not_a_plain_file_name(text); !name.is_string() || !why.empty()) {
        reader.refuse(fmt::format("\"model_files\" names {}, which is not a file name inside the step directory{}",
                                  MetadataReader::shown(name), why.empty() ? "" : ": " + why));
      }
      if (out.files && !out.files->contains(text)) {
        reader.refuse(fmt::format("\"model_files\" names {}, which \"files\" does not list",
                                  io::quoted_file_name(text)));
      }
      out.model_files.names.push_back(text);
    }
  }
  return out;
}

}  // namespace tessel::train
