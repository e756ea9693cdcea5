#include "io/hf_export_writer.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/errno_text.h"
#include "core/error.h"
#include "io/box_rows.h"
#include "io/safetensors_dtype.h"

namespace tessel::io {
namespace {

constexpr uint64_t kPieceBytes = uint64_t{16} << 20;

void write_all(int fd, uint64_t position, const std::byte* data, uint64_t bytes, const std::filesystem::path& file) {
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, data, bytes, static_cast<off_t>(position));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error(fmt::format("{}: write failed: {} (is the disk full?)", file.string(),
                              n < 0 ? errno_text() : std::string("no progress")));
    }
    data += n;
    position += static_cast<uint64_t>(n);
    bytes -= static_cast<uint64_t>(n);
  }
}

}  // namespace

void create_export_files(const std::filesystem::path& dir, const HfExportLayout& layout) {
  for (const ExportFile& file : layout.files()) {
    const std::filesystem::path path = dir / file.name;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw Error(fmt::format("{}: cannot create it: {}", path.string(), errno_text()));
    try {
      write_all(fd, 0, reinterpret_cast<const std::byte*>(file.header.data()), file.header.size(), path);
      if (::ftruncate(fd, static_cast<off_t>(file.bytes)) != 0) {
        throw Error(fmt::format("{}: cannot size it to {} bytes: {} (is the disk full?)", path.string(), file.bytes,
                                errno_text()));
      }
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }
}

HfExportWriter::HfExportWriter(std::filesystem::path dir, const HfExportLayout& layout)
    : dir_(std::move(dir)), layout_(layout) {
  for (const ExportFile& file : layout.files()) {
    const std::filesystem::path path = dir_ / file.name;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
      const std::string why = errno_text();
      for (int open_fd : fds_) ::close(open_fd);
      throw Error(fmt::format("{}: cannot open it to write the export's tensors: {}", path.string(), why));
    }
    fds_.push_back(fd);
  }
}

HfExportWriter::~HfExportWriter() {
  for (int fd : fds_) ::close(fd);
}

void HfExportWriter::finish() {
  std::string failed;
  for (size_t f = 0; f < fds_.size(); ++f) {
    if (::fsync(fds_[f]) != 0 && failed.empty()) failed = (dir_ / layout_.files()[f].name).string() + ": " + errno_text();
    if (::close(fds_[f]) != 0 && failed.empty()) failed = (dir_ / layout_.files()[f].name).string() + ": " + errno_text();
  }
  fds_.clear();
  if (!failed.empty()) throw Error(fmt::format("cannot flush the export to disk: {}", failed));
}

void HfExportWriter::write_box(const std::string& name, const std::vector<int64_t>& offset, const at::Tensor& box) {
  const ExportTensor& t = layout_.tensor(name);
  const auto rank = t.shape.size();
  TESSEL_CHECK(offset.size() == rank && static_cast<size_t>(box.dim()) == rank,
               "export tensor '{}' has {} dimensions; a box of {} at an offset of {} was given", name, rank, box.dim(),
               offset.size());
  for (size_t d = 0; d < rank; ++d) {
    TESSEL_CHECK(offset[d] >= 0 && offset[d] + box.size(static_cast<int64_t>(d)) <= t.shape[d],
                 "export tensor '{}' has shape [{}]; a box at [{}] of shape [{}] is outside it", name,
                 fmt::join(t.shape, ", "), fmt::join(offset, ", "), fmt::join(box.sizes(), ", "));
  }
  if (box.numel() == 0) return;
  // Pieces of at most kPieceBytes along dim 0 (one row when a row is larger).
  const auto itemsize = static_cast<uint64_t>(std::max(safetensors_itemsize(layout_.dtype()), box.element_size()));
  const uint64_t row_bytes = rank == 0 ? itemsize : itemsize * static_cast<uint64_t>(box.numel() / box.size(0));
  const int64_t rows = rank == 0 ? 1 : box.size(0);
  const auto rows_per_piece = static_cast<int64_t>(std::max<uint64_t>(1, kPieceBytes / row_bytes));
  for (int64_t r0 = 0; r0 < rows; r0 += rows_per_piece) {
    if (rank == 0) {
      write_piece(name, offset, box);
      break;
    }
    std::vector<int64_t> at = offset;
    at[0] += r0;
    write_piece(name, at, box.narrow(0, r0, std::min(rows_per_piece, rows - r0)));
  }
}

void HfExportWriter::write_piece(const std::string& name, const std::vector<int64_t>& offset, const at::Tensor& piece) {
  const ExportTensor& t = layout_.tensor(name);
  const ExportPlace& place = layout_.place(name);
  const at::Tensor data = piece.detach().to(at::kCPU).to(layout_.dtype()).contiguous();
  const auto* bytes = static_cast<const std::byte*>(data.data_ptr());
  const size_t rank = t.shape.size();
  const auto itemsize = static_cast<uint64_t>(data.element_size());
  if (rank == 0) {
    write_at(place.file, place.offset, bytes, itemsize);
    return;
  }
  const std::vector<int64_t> shape = data.sizes().vec();
  const BoxRows rows = box_rows(t.shape, offset, shape, itemsize);
  const std::vector<uint64_t>& stride = rows.stride;
  const size_t row_dim = rows.row_dim;
  const uint64_t run = rows.run;
  const uint64_t inner = rows.inner;
  // Consecutive runs that are adjacent in the file go out in one write.
  uint64_t pending_at = 0, pending_bytes = 0;
  const std::byte* pending = bytes;
  std::vector<int64_t> index(row_dim + 1, 0);
  for (;;) {
    uint64_t at = place.offset + inner;
    for (size_t d = 0; d <= row_dim; ++d) at += static_cast<uint64_t>(offset[d] + index[d]) * stride[d];
    if (pending_bytes > 0 && at == pending_at + pending_bytes) {
      pending_bytes += run;
    } else {
      if (pending_bytes > 0) write_at(place.file, pending_at, pending, pending_bytes);
      pending += pending_bytes;
      pending_at = at;
      pending_bytes = run;
    }
    size_t d = row_dim + 1;
    while (d > 0 && ++index[d - 1] == shape[d - 1]) index[--d] = 0;
    if (d == 0) break;
  }
  write_at(place.file, pending_at, pending, pending_bytes);
}

void HfExportWriter::write_at(size_t file, uint64_t position, const std::byte* data, uint64_t bytes) {
  TESSEL_CHECK(file < fds_.size(), "the export's files are closed (finish() was called)");
  write_all(fds_[file], position, data, bytes, dir_ / layout_.files()[file].name);
}

}  // namespace tessel::io
