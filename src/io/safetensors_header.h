// The JSON header of a safetensors file, parsed and validated against the
// size of the data buffer that follows it. Every later read trusts these
// bounds, so all checks on untrusted header content live here: a bad file
// fails at open with a message naming the file and the tensor, never with a
// crash or garbage values at load time.
//
// File layout: 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
// {string: string}}, then the data buffer; offsets are relative to its start.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::io {

// Headers larger than this are rejected as corrupt (the limit HF's reader uses).
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct TensorInfo {
  std::string name;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> shape;
  uint64_t data_begin = 0;  // byte offsets relative to the data buffer
  uint64_t data_end = 0;

  int64_t numel() const;
  uint64_t nbytes() const { return data_end - data_begin; }
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;                   // in data order (by data_begin, then name)
  std::map<std::string, size_t, std::less<>> index;  // name -> position in tensors
  std::map<std::string, std::string> metadata;
};

// Parses the JSON text of a header. `data_bytes` is the size of the data
// buffer after the header; `file` is only used in error messages. Throws
// tessel::Error naming the file (and the tensor) when the text is not a JSON
// object, an entry is malformed, a dtype is unknown, or data_offsets are out
// of range or disagree with shape and dtype. Gaps and overlaps between
// tensors are accepted (HF writes neither; readers need only the bounds).
SafetensorsHeader parse_safetensors_header(std::string_view json_text, uint64_t data_bytes,
                                           const std::string& file);

}  // namespace tessel::io
