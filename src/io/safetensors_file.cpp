#include "io/safetensors_file.h"

#include <ATen/ATen.h>
#include <fmt/ranges.h>

#include <bit>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "io/box_rows.h"
#include "io/byte_copy.h"
#include "io/name_hints.h"
#include "io/safetensors_dtype.h"

namespace tessel::io {

// The format is little-endian and tensors are copied byte for byte.
static_assert(std::endian::native == std::endian::little,
              "tessel::io reads safetensors by raw copy and needs a little-endian host");

namespace {

// The part of a tensor one read covers: `rows` chunks of `chunk` bytes,
// `stride` bytes apart, starting `first` bytes into the tensor.
struct SliceGeometry {
  std::vector<int64_t> shape;  // of the result
  uint64_t rows = 0;
  uint64_t chunk = 0;
  uint64_t stride = 0;
  uint64_t first = 0;
};

SliceGeometry slice_geometry(const TensorInfo& info, int64_t dim, int64_t start, int64_t length,
                             const std::string& file) {
  const auto rank = static_cast<int64_t>(info.shape.size());
  TESSEL_CHECK(rank > 0, "{}: tensor '{}' is a scalar (shape []) and cannot be sliced", file,
               info.name);
  TESSEL_CHECK(dim >= -rank && dim < rank,
               "{}: tensor '{}' has {} dimensions; slice dim {} is out of range", file, info.name,
               rank, dim);
  if (dim < 0) dim += rank;
  const int64_t size = info.shape[static_cast<size_t>(dim)];
  TESSEL_CHECK(start >= 0 && length >= 0 && start <= size && length <= size - start,
               "{}: tensor '{}' has size {} in dim {} (shape [{}]); slice [{}, {}) is out of range",
               file, info.name, size, dim, fmt::join(info.shape, ", "), start, start + length);
  uint64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= static_cast<uint64_t>(info.shape[static_cast<size_t>(d)]);
  uint64_t inner = static_cast<uint64_t>(safetensors_itemsize(info.dtype));
  for (int64_t d = dim + 1; d < rank; ++d)
    inner *= static_cast<uint64_t>(info.shape[static_cast<size_t>(d)]);

  SliceGeometry g;
  g.shape = info.shape;
  g.shape[static_cast<size_t>(dim)] = length;
  g.rows = outer;
  g.chunk = inner * static_cast<uint64_t>(length);
  g.stride = inner * static_cast<uint64_t>(size);
  g.first = inner * static_cast<uint64_t>(start);
  // A row-major slice whose outer rows are contiguous is one range.
  if (g.chunk == g.stride || g.rows <= 1) {
    g.chunk *= g.rows;
    g.stride = g.chunk;
    g.rows = g.chunk > 0 ? 1 : 0;
  }
  return g;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  auto file = MappedFile::open(path);
  const std::string where = path.string();
  TESSEL_CHECK(file->size() >= 8,
               "{}: file is {} bytes, too short for a safetensors file (it "
               "starts with an 8-byte header length); the file is truncated or not safetensors",
               where, file->size());
  uint64_t header_len = 0;
  std::memcpy(&header_len, file->data(), 8);
  TESSEL_CHECK(header_len <= kMaxSafetensorsHeaderBytes,
               "{}: header length {} is larger than the {}-byte limit; the file is corrupt or "
               "not safetensors",
               where, header_len, kMaxSafetensorsHeaderBytes);
  TESSEL_CHECK(header_len <= file->size() - 8,
               "{}: header length {} runs past the end of the {}-byte file; the file is "
               "truncated or not safetensors",
               where, header_len, file->size());
  const std::string_view text(reinterpret_cast<const char*>(file->data() + 8), header_len);
  const uint64_t data_offset = 8 + header_len;
  auto header = std::make_shared<const SafetensorsHeader>(
      parse_safetensors_header(text, file->size() - data_offset, where));
  return SafetensorsFile(std::move(file), data_offset, std::move(header));
}

SafetensorsFile::SafetensorsFile(std::shared_ptr<const MappedFile> file, uint64_t data_offset,
                                 std::shared_ptr<const SafetensorsHeader> header)
    : file_(std::move(file)), data_offset_(data_offset), header_(std::move(header)) {}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(header_->tensors.size());
  for (const auto& t : header_->tensors) out.push_back(t.name);
  return out;
}

bool SafetensorsFile::contains(const std::string& name) const {
  return header_->index.count(name) > 0;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = header_->index.find(name);
  if (it == header_->index.end()) {
    throw Error(fmt::format("{}: no tensor named '{}' ({})", path().string(), name,
                            describe_available_names(names(), name)));
  }
  return header_->tensors[it->second];
}

at::Tensor SafetensorsFile::load(const std::string& name) const {
  const auto& t = info(name);
  if (t.shape.empty()) {
    // A scalar: one element, nothing to slice.
    auto out = at::empty({}, at::TensorOptions().dtype(t.dtype));
    std::memcpy(out.data_ptr(), file_->data() + data_offset_ + t.data_begin, t.nbytes());
    return out;
  }
  return load_slice(name, 0, 0, t.shape[0]);
}

std::map<std::string, at::Tensor> SafetensorsFile::load_many(
    const std::vector<std::string>& names) const {
  std::map<std::string, at::Tensor> out;
  for (const auto& name : names) out.emplace(name, load(name));
  return out;
}

at::Tensor SafetensorsFile::load_slice(const std::string& name, int64_t dim, int64_t start,
                                       int64_t length) const {
  const auto& t = info(name);
  const auto g = slice_geometry(t, dim, start, length, path().string());
  auto out = at::empty(g.shape, at::TensorOptions().dtype(t.dtype));
  const std::byte* src = file_->data() + data_offset_ + t.data_begin + g.first;
  // Readahead helps only when every byte of the range is wanted.
  if (g.rows == 1) file_->prefetch(data_offset_ + t.data_begin + g.first, g.chunk);
  copy_rows(static_cast<std::byte*>(out.data_ptr()), src, g.rows, g.chunk, g.stride);
  return out;
}

at::Tensor SafetensorsFile::load_box(const std::string& name, const std::vector<int64_t>& offset,
                                     const std::vector<int64_t>& shape) const {
  auto out = at::empty(shape, at::TensorOptions().dtype(info(name).dtype));
  read_box_into(name, offset, out);
  return out;
}

void SafetensorsFile::read_box_into(const std::string& name, const std::vector<int64_t>& offset,
                                    const at::Tensor& dst) const {
  const auto& t = info(name);
  const size_t rank = t.shape.size();
  const std::vector<int64_t> shape = dst.sizes().vec();
  TESSEL_CHECK(offset.size() == rank && shape.size() == rank,
               "{}: tensor '{}' has {} dimensions; a box of {} was asked for", path().string(), name, rank,
               shape.size());
  for (size_t d = 0; d < rank; ++d) {
    TESSEL_CHECK(offset[d] >= 0 && shape[d] >= 0 && offset[d] + shape[d] <= t.shape[d],
                 "{}: tensor '{}' has shape [{}]; box offset [{}] shape [{}] is out of range", path().string(),
                 name, fmt::join(t.shape, ", "), fmt::join(offset, ", "), fmt::join(shape, ", "));
  }
  if (dst.numel() == 0) return;
  const auto itemsize = static_cast<uint64_t>(safetensors_itemsize(t.dtype));
  const uint64_t base = data_offset_ + t.data_begin;
  if (rank == 0) {
    at::Tensor one = at::empty({}, at::TensorOptions().dtype(t.dtype));
    std::memcpy(one.data_ptr(), file_->data() + base, itemsize);
    dst.copy_(one);
    return;
  }
  // Rows along row_dim, each a contiguous run of the file (io/box_rows.h).
  const BoxRows rows_of_box = box_rows(t.shape, offset, shape, itemsize);
  const std::vector<uint64_t>& stride = rows_of_box.stride;
  const size_t row_dim = rows_of_box.row_dim;
  const uint64_t run = rows_of_box.run;
  const uint64_t inner = rows_of_box.inner;
  // Rows move in batches of about kBatchBytes: copied straight into dst when
  // it can take the bytes as they are, else through a host staging buffer
  // that converts the dtype or crosses to dst's device (a rank's shard on a
  // GPU); the file pages of each batch are released once read.
  constexpr uint64_t kBatchBytes = uint64_t{16} << 20;
  const int64_t batch_rows = static_cast<int64_t>(std::max<uint64_t>(1, kBatchBytes / run));
  const bool direct = dst.scalar_type() == t.dtype && dst.device().is_cpu();
  at::Tensor staging;
  std::vector<int64_t> index(row_dim, 0);
  for (;;) {
    uint64_t at_row = 0;
    at::Tensor dst_rows = dst;
    for (size_t d = 0; d < row_dim; ++d) {
      at_row += static_cast<uint64_t>(offset[d] + index[d]) * stride[d];
      dst_rows = dst_rows.select(0, index[d]);
    }
    for (int64_t r0 = 0; r0 < shape[row_dim]; r0 += batch_rows) {
      const int64_t rows = std::min(batch_rows, shape[row_dim] - r0);
      const uint64_t first = base + at_row + static_cast<uint64_t>(offset[row_dim] + r0) * stride[row_dim];
      const std::byte* src = file_->data() + first + inner;
      at::Tensor target = dst_rows.narrow(0, r0, rows);
      if (direct && target.is_contiguous()) {
        copy_rows(static_cast<std::byte*>(target.data_ptr()), src, static_cast<uint64_t>(rows), run,
                  stride[row_dim]);
      } else {
        const auto bytes = static_cast<int64_t>(static_cast<uint64_t>(rows) * run);
        if (!staging.defined() || staging.numel() < bytes) {
          staging = at::empty({bytes}, at::TensorOptions().dtype(at::kByte));
        }
        copy_rows(static_cast<std::byte*>(staging.data_ptr()), src, static_cast<uint64_t>(rows), run,
                  stride[row_dim]);
        std::vector<int64_t> rows_shape(shape.begin() + static_cast<int64_t>(row_dim), shape.end());
        rows_shape[0] = rows;
        target.copy_(at::from_blob(staging.data_ptr(), rows_shape, at::TensorOptions().dtype(t.dtype)));
      }
      file_->release(first + inner, static_cast<uint64_t>(rows - 1) * stride[row_dim] + run);
    }
    size_t d = row_dim;
    while (d > 0 && ++index[d - 1] == shape[d - 1]) index[--d] = 0;
    if (d == 0) break;
  }
}

at::Tensor SafetensorsFile::view(const std::string& name) const {
  const auto& t = info(name);
  if (t.shape.empty()) return load(name);
  return view_slice(name, 0, t.shape[0]);
}

at::Tensor SafetensorsFile::view_slice(const std::string& name, int64_t start,
                                       int64_t length) const {
  const auto& t = info(name);
  const auto g = slice_geometry(t, 0, start, length, path().string());
  const uint64_t offset = data_offset_ + t.data_begin + g.first;
  const auto itemsize = static_cast<uint64_t>(safetensors_itemsize(t.dtype));
  // Misaligned elements would break vectorised kernels; empty ranges cannot be mapped.
  if (g.chunk == 0 || offset % itemsize != 0) return load_slice(name, 0, start, length);
  auto mapping = file_->map_private(offset, g.chunk);
  void* data = mapping.get();
  return at::from_blob(
      data, g.shape, [mapping = std::move(mapping)](void*) mutable { mapping.reset(); },
      at::TensorOptions().dtype(t.dtype));
}

}  // namespace tessel::io
