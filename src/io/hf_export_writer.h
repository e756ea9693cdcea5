// Writing the weights of a Hugging Face model directory piece by piece, at
// the places an HfExportLayout gives them: one process creates the files
// (each its header, then its data area at full size), then any number of
// processes open them and write boxes of tensors (a row range of a full
// tensor, a rank's rows of its tensor-parallel piece) with positioned
// writes, in any order. No one holds a whole tensor or a whole file: a box
// is converted to the export's dtype and written through pieces of at most
// 16 MiB. Nothing here checks that every byte was written: the callers count
// the elements they wrote (train/hf_export.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "io/hf_export_layout.h"

namespace tessel::io {

// Creates layout.files() in `dir` (which must exist), replacing files of the
// same names: each holds its header and zeros up to its size.
void create_export_files(const std::filesystem::path& dir, const HfExportLayout& layout);

class HfExportWriter {
 public:
  // Opens the files create_export_files made in `dir` for writing.
  HfExportWriter(std::filesystem::path dir, const HfExportLayout& layout);
  ~HfExportWriter();
  HfExportWriter(const HfExportWriter&) = delete;
  HfExportWriter& operator=(const HfExportWriter&) = delete;

  // Writes `box` (any dtype, device and strides) as the elements
  // [offset, offset + box.sizes()) of tensor `name`, converted to the
  // layout's dtype. tessel::Error naming the tensor when the box is outside
  // it, and naming the file when a write fails.
  void write_box(const std::string& name, const std::vector<int64_t>& offset, const at::Tensor& box);

  // Flushes what this writer wrote to disk and closes the files; tessel::Error
  // when the system reports a failure. Without it the files are closed unflushed.
  void finish();

 private:
  void write_piece(const std::string& name, const std::vector<int64_t>& offset, const at::Tensor& piece);
  void write_at(size_t file, uint64_t position, const std::byte* data, uint64_t bytes);

  std::filesystem::path dir_;
  const HfExportLayout& layout_;
  std::vector<int> fds_;
};

}  // namespace tessel::io
