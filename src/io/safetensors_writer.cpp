#include "io/safetensors_writer.h"

#include <ATen/ATen.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <bit>
#include <numeric>
#include <set>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors_dtype.h"

namespace tessel::io {

static_assert(std::endian::native == std::endian::little,
              "tessel::io writes safetensors by raw copy and needs a little-endian host");

void check_named_tensors(const std::filesystem::path& path, const NamedTensors& tensors) {
  std::set<std::string_view> seen;
  for (const auto& [name, tensor] : tensors) {
    TESSEL_CHECK(!name.empty(), "{}: a tensor has an empty name", path.string());
    TESSEL_CHECK(name != "__metadata__", "{}: '__metadata__' is reserved and cannot name a tensor",
                 path.string());
    TESSEL_CHECK(seen.insert(name).second,
                 "{}: tensor '{}' is given twice; pass each (shared or tied) tensor once",
                 path.string(), name);
    TESSEL_CHECK(tensor.defined(), "{}: tensor '{}' is undefined", path.string(), name);
    TESSEL_CHECK(tensor.layout() == at::kStrided,
                 "{}: tensor '{}' is not dense (sparse or another non-strided layout); convert it "
                 "with to_dense() first",
                 path.string(), name);
    try {
      safetensors_dtype_name(tensor.scalar_type());
    } catch (const Error& e) {
      throw Error(fmt::format("{}: tensor '{}': {}", path.string(), name, e.what()));
    }
  }
}

std::string safetensors_header_bytes(const std::vector<HeaderEntry>& entries,
                                     const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  for (const auto& e : entries) {
    header[e.name] = {{"dtype", safetensors_dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  }
  std::string text = header.dump();
  // HF pads with spaces so the data buffer starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t length = text.size();
  std::string out(sizeof(length), '\0');
  std::memcpy(out.data(), &length, sizeof(length));
  return out + text;
}

FileDigest save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                            const std::map<std::string, std::string>& metadata,
                            const TensorProducer& produce) {
  check_named_tensors(path, tensors);

  // Largest elements first keeps every tensor aligned to its element size.
  std::vector<size_t> data_order(tensors.size());
  std::iota(data_order.begin(), data_order.end(), size_t{0});
  std::stable_sort(data_order.begin(), data_order.end(), [&](size_t a, size_t b) {
    return tensors[a].second.element_size() > tensors[b].second.element_size();
  });
  std::vector<std::pair<uint64_t, uint64_t>> offsets(tensors.size());
  uint64_t cursor = 0;
  for (size_t i : data_order) {
    const auto& t = tensors[i].second;
    const auto bytes = static_cast<uint64_t>(t.numel()) * static_cast<uint64_t>(t.element_size());
    offsets[i] = {cursor, cursor + bytes};
    cursor += bytes;
  }

  std::vector<HeaderEntry> entries;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    entries.push_back({name, t.scalar_type(), t.sizes().vec(), offsets[i].first, offsets[i].second});
  }
  const std::string header = safetensors_header_bytes(entries, metadata);

  AtomicFileWriter out(path);
  out.write(header.data(), header.size());
  for (size_t i : data_order) {
    const auto& [name, described] = tensors[i];
    at::Tensor data = described;
    if (produce) {
      data = produce(name, described);
      TESSEL_CHECK(data.defined() && data.sizes() == described.sizes(),
                   "{}: the data made for tensor '{}' does not have its shape [{}]", path.string(), name,
                   fmt::join(described.sizes(), ", "));
      data = data.to(described.scalar_type());
    }
    // Already contiguous CPU tensors are written straight from their memory.
    const at::Tensor t = data.detach().cpu().resolve_conj().resolve_neg().contiguous();
    out.write(t.data_ptr(), offsets[i].second - offsets[i].first);
  }
  return out.commit();
}

}  // namespace tessel::io
