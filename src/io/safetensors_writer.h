// Writing a safetensors file that Hugging Face tools read: 8-byte header
// length, a JSON header padded with spaces to a multiple of 8 bytes, then the
// tensors' bytes back to back with no gaps. Data is ordered by element size
// (largest first), so with the 8-byte-aligned header every tensor starts at an
// offset aligned to its element size and can be viewed without a copy. The
// file appears atomically (temporary file + rename).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <functional>
#include <map>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/file_digest.h"

namespace tessel::io {

// Tensors in the order their names should appear in the header.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Makes a tensor's data at write time, for tensors too many to hold at once
// (a model written parameter by parameter): given the entry's name and its
// described tensor (dtype and shape; e.g. on the meta device), returns the
// data (same shape; converted to the described dtype when it differs).
// Called once per tensor, in data order (the given order among tensors of
// one element size).
using TensorProducer = std::function<at::Tensor(const std::string& name, const at::Tensor& described)>;

// Writes `tensors` (any device, any strides: each is copied to contiguous CPU
// memory one at a time only when it is not already) and `metadata` (the
// header's "__metadata__"; omitted when empty) to `path`. Dtypes: those of
// safetensors_dtype.h. Throws tessel::Error naming the file and tensor for an
// empty, duplicate or reserved ("__metadata__") name, an undefined or sparse
// tensor, or an unsupported dtype. The parent directory must exist.
// With a `produce`, `tensors` only describe the data (see TensorProducer).
// Returns the written file's size and hash.
FileDigest save_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                            const std::map<std::string, std::string>& metadata = {},
                            const TensorProducer& produce = {});

// One tensor of a header being written: its data at [begin, end) of the data
// buffer.
struct HeaderEntry {
  std::string name;
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// What a safetensors file holds before its data: the 8-byte little-endian
// length, then the JSON header (entries in the given order, "__metadata__"
// first unless empty) padded with spaces to a multiple of 8 bytes, as HF pads.
std::string safetensors_header_bytes(const std::vector<HeaderEntry>& entries,
                                     const std::map<std::string, std::string>& metadata);

// The checks save_safetensors makes on names and tensors, without writing;
// `file` names the destination in messages. Lets a multi-file save fail
// before writing anything.
void check_named_tensors(const std::filesystem::path& file, const NamedTensors& tensors);

}  // namespace tessel::io
