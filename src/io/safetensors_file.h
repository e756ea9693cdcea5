// Reading a safetensors file: open maps the file and validates the header;
// tensors are then read on demand, whole or as a slice along one dimension,
// touching only the bytes needed. This is how each rank reads just its
// tensor-parallel / FSDP shard of a checkpoint.
//
// Two ways to get a tensor:
// - load / load_slice: an owning CPU tensor, one memcpy from the mapping.
// - view / view_slice: zero-copy; the tensor borrows a private copy-on-write
//   mapping of the file that lives as long as the tensor (its deleter holds
//   the mapping). Writing to it is safe: it changes neither the file nor other
//   tensors read from it. Falls back to a copy when the data is not aligned
//   to its element size. Do not truncate or rewrite the file in place while a
//   view is alive (tessel's writers replace files by rename, which is safe).
//
// Tensors are returned with the file's dtype and shape on the CPU; the host
// must be little-endian, like the format. Copying a SafetensorsFile is cheap
// and shares the mapping; it is safe to read from several threads.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/mapped_file.h"
#include "io/safetensors_header.h"

namespace tessel::io {

class SafetensorsFile {
 public:
  // Maps and validates `path`. Throws tessel::Error naming the file when it is
  // missing, shorter than 8 bytes, has a header length past the end of the
  // file, or a header that fails parse_safetensors_header's checks.
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return file_->path(); }

  // Tensor names in data order (the order reading is sequential in).
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  // Throws tessel::Error naming the file, the tensor and the closest names.
  const TensorInfo& info(const std::string& name) const;
  const std::vector<TensorInfo>& tensors() const { return header_->tensors; }
  // The "__metadata__" map of the header (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return header_->metadata; }

  // An owning copy of the whole tensor.
  at::Tensor load(const std::string& name) const;
  // Owning copies of several tensors, by name.
  std::map<std::string, at::Tensor> load_many(const std::vector<std::string>& names) const;
  // An owning copy of tensor.narrow(dim, start, length): dim may be negative;
  // reads one contiguous range for dim 0, `length` rows' worth per outer row
  // otherwise. Throws when dim, start or length are out of range.
  at::Tensor load_slice(const std::string& name, int64_t dim, int64_t start, int64_t length) const;

  // An owning copy of the box [offset, offset + shape) of the tensor (one
  // offset and extent per dimension), reading only the bytes inside it and
  // releasing the file pages it read (MappedFile::release), so a rank reading
  // its shard keeps no file memory resident. Throws when the box is out of range.
  at::Tensor load_box(const std::string& name, const std::vector<int64_t>& offset,
                      const std::vector<int64_t>& shape) const;
  // The same box written into `dst` (its shape is the box's; any dtype, which
  // the values are converted to; any strides), through no buffer larger than
  // 16 MiB: how a rank fills its shard in place.
  void read_box_into(const std::string& name, const std::vector<int64_t>& offset, const at::Tensor& dst) const;

  // Zero-copy variants (see above). view_slice slices dim 0.
  at::Tensor view(const std::string& name) const;
  at::Tensor view_slice(const std::string& name, int64_t start, int64_t length) const;

 private:
  SafetensorsFile(std::shared_ptr<const MappedFile> file, uint64_t data_offset,
                  std::shared_ptr<const SafetensorsHeader> header);

  std::shared_ptr<const MappedFile> file_;
  uint64_t data_offset_;  // file offset of the data buffer: 8 + header length
  std::shared_ptr<const SafetensorsHeader> header_;
};

}  // namespace tessel::io
