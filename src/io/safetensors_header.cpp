#include "io/safetensors_header.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/error.h"
#include "io/safetensors_dtype.h"

namespace tessel::io {
namespace {

using nlohmann::json;

// A JSON integer >= 0 that fits in uint64 (JSON numbers may be negative or
// fractional; neither is a valid size or offset).
bool is_unsigned_integer(const json& j) {
  return j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0);
}

TensorInfo parse_entry(const std::string& name, const json& entry, uint64_t data_bytes,
                       const std::string& file) {
  const auto where = [&] { return fmt::format("{}: tensor '{}'", file, name); };
  TESSEL_CHECK(entry.is_object(),
               "{}: header entry is {}, expected an object with dtype, shape "
               "and data_offsets; the file is corrupt",
               where(), entry.type_name());
  TensorInfo info;
  info.name = name;

  const auto dtype_it = entry.find("dtype");
  TESSEL_CHECK(dtype_it != entry.end() && dtype_it->is_string(),
               "{}: missing or non-string 'dtype'; the file is corrupt", where());
  const auto dtype_name = dtype_it->get<std::string>();
  const auto type = scalar_type_from_safetensors(dtype_name);
  TESSEL_CHECK(type.has_value(),
               "{}: dtype '{}' is unknown or unsupported (supported: {}); "
               "convert the checkpoint to one of these",
               where(), dtype_name, supported_safetensors_dtypes());
  info.dtype = *type;

  const auto shape_it = entry.find("shape");
  TESSEL_CHECK(shape_it != entry.end() && shape_it->is_array(),
               "{}: missing or non-array 'shape'; the file is corrupt", where());
  uint64_t numel = 1;
  bool overflow = false;
  for (const auto& d : *shape_it) {
    TESSEL_CHECK(is_unsigned_integer(d) && d.get<uint64_t>() <= uint64_t{INT64_MAX},
                 "{}: shape {} has a dimension that is not a non-negative integer", where(),
                 shape_it->dump());
    const auto v = d.get<uint64_t>();
    info.shape.push_back(static_cast<int64_t>(v));
    overflow = overflow || __builtin_mul_overflow(numel, v, &numel);
  }

  const auto off_it = entry.find("data_offsets");
  TESSEL_CHECK(off_it != entry.end() && off_it->is_array() && off_it->size() == 2 &&
                   is_unsigned_integer((*off_it)[0]) && is_unsigned_integer((*off_it)[1]),
               "{}: 'data_offsets' must be [begin, end] with non-negative integers, got {}",
               where(), off_it == entry.end() ? std::string("nothing") : off_it->dump());
  info.data_begin = (*off_it)[0].get<uint64_t>();
  info.data_end = (*off_it)[1].get<uint64_t>();
  TESSEL_CHECK(info.data_begin <= info.data_end && info.data_end <= data_bytes,
               "{}: data_offsets [{}, {}] lie outside the {}-byte data buffer; the file is "
               "truncated or corrupt",
               where(), info.data_begin, info.data_end, data_bytes);

  uint64_t expected = 0;
  overflow =
      overflow || __builtin_mul_overflow(
                      numel, static_cast<uint64_t>(safetensors_itemsize(info.dtype)), &expected);
  TESSEL_CHECK(!overflow && expected == info.nbytes(),
               "{}: data_offsets [{}, {}] span {} bytes but shape {} of {} needs {} bytes; the "
               "file is corrupt",
               where(), info.data_begin, info.data_end, info.nbytes(), shape_it->dump(), dtype_name,
               overflow ? std::string("too many") : std::to_string(expected));
  return info;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

SafetensorsHeader parse_safetensors_header(std::string_view json_text, uint64_t data_bytes,
                                           const std::string& file) {
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    throw Error(
        fmt::format("{}: the safetensors header is not valid JSON ({}); the file is "
                    "corrupt or not a safetensors file",
                    file, e.what()));
  }
  TESSEL_CHECK(root.is_object(),
               "{}: the safetensors header is a JSON {}, expected an object "
               "mapping tensor names to entries; the file is corrupt",
               file, root.type_name());

  SafetensorsHeader header;
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      TESSEL_CHECK(entry.is_object(),
                   "{}: '__metadata__' is a JSON {}, expected an object of "
                   "strings",
                   file, entry.type_name());
      for (const auto& [key, value] : entry.items()) {
        // The format says strings; keep other values readable rather than fail.
        header.metadata[key] = value.is_string() ? value.get<std::string>() : value.dump();
      }
      continue;
    }
    header.tensors.push_back(parse_entry(name, entry, data_bytes, file));
  }
  std::sort(header.tensors.begin(), header.tensors.end(), [](const auto& a, const auto& b) {
    return a.data_begin != b.data_begin ? a.data_begin < b.data_begin : a.name < b.name;
  });
  for (size_t i = 0; i < header.tensors.size(); ++i) {
    header.index.emplace(header.tensors[i].name, i);
  }
  return header;
}

}  // namespace tessel::io
