// Where every byte of a Hugging Face model directory's weights goes, decided
// before any is written: the files (one model.safetensors, or
// model-0000k-of-0000N.safetensors shards split as save_pretrained splits:
// consecutive tensors, a new shard when the next tensor would pass the
// limit, a tensor larger than the limit alone in its shard), each file's
// header, and each tensor's byte range in its file. Every process that
// computes the layout of the same tensors gets the same one, so several
// processes can write one directory at once, each its own pieces at their
// places (io/hf_export_writer.h), and the result is the same bytes whoever
// wrote which piece. Every tensor has the export's one dtype; data is in the
// given order, so each tensor is aligned to its element size.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tessel::io {

struct ExportTensor {
  std::string name;  // the HF name
  std::vector<int64_t> shape;
};

struct ExportFile {
  std::string name;    // "model.safetensors" or "model-00001-of-00003.safetensors"
  std::string header;  // the bytes before the data (safetensors_header_bytes)
  uint64_t bytes = 0;  // the whole file
};

// A tensor's data: bytes [offset, offset + bytes) of files()[file].
struct ExportPlace {
  size_t file = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

class HfExportLayout {
 public:
  // tessel::Error for an empty or repeated name, a negative size or a
  // max_shard_bytes of 0.
  HfExportLayout(std::vector<ExportTensor> tensors, c10::ScalarType dtype, uint64_t max_shard_bytes);

  c10::ScalarType dtype() const { return dtype_; }
  const std::vector<ExportTensor>& tensors() const { return tensors_; }
  const std::vector<ExportFile>& files() const { return files_; }
  bool sharded() const { return files_.size() > 1; }
  // Bytes of tensor data in all files (the index's metadata.total_size).
  uint64_t total_bytes() const { return total_bytes_; }
  // tessel::Error naming the tensor when it is not in the layout.
  const ExportTensor& tensor(const std::string& name) const;
  const ExportPlace& place(const std::string& name) const;
  // model.safetensors.index.json for a sharded layout, as transformers
  // writes it: {"metadata": {"total_size": N}, "weight_map": {name: file}},
  // the map sorted by name. "" when there is one file.
  std::string index_json() const;

 private:
  c10::ScalarType dtype_;
  std::vector<ExportTensor> tensors_;
  std::vector<ExportFile> files_;
  std::map<std::string, size_t> position_;  // name -> index in tensors_ and places_
  std::vector<ExportPlace> places_;
  uint64_t total_bytes_ = 0;
};

// save_pretrained's split of tensors of `bytes` (in order) into shards of at
// most max_shard_bytes: runs of consecutive indices, a tensor larger than the
// limit alone in its run. Always at least one (possibly empty) run.
std::vector<std::vector<size_t>> split_into_shards(const std::vector<uint64_t>& bytes, uint64_t max_shard_bytes);

// The file names HF gives `count` shards (count > 1), or "model.safetensors".
std::string shard_file_name(size_t index, size_t count);

// model.safetensors.index.json's text for `weight_map` (tensor -> file).
std::string hf_index_json(uint64_t total_size, const std::map<std::string, std::string>& weight_map);

}  // namespace tessel::io
