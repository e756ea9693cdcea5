#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/errno_text.h"
#include "core/error.h"

namespace tessel::io {
namespace {

uint64_t page_size() {
  static const uint64_t size = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw Error(fmt::format("{}: cannot open for reading: {}", path.string(), errno_text()));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: not a regular file", path.string()));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  std::byte* data = nullptr;
  // mmap refuses length 0; an empty file has nothing to map (callers reject it).
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const std::string why = errno_text();
      ::close(fd);
      throw Error(fmt::format("{}: cannot memory-map {} bytes: {}", path.string(), size, why));
    }
    data = static_cast<std::byte*>(p);
  }
  return std::shared_ptr<const MappedFile>(new MappedFile(path, fd, data, size));
}

MappedFile::MappedFile(std::filesystem::path path, int fd, std::byte* data, uint64_t size)
    : path_(std::move(path)), fd_(fd), data_(data), size_(size) {}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
  ::close(fd_);
}

std::shared_ptr<std::byte> MappedFile::map_private(uint64_t offset, uint64_t length) const {
  TESSEL_CHECK(length > 0 && offset <= size_ && length <= size_ - offset,
               "{}: cannot map bytes [{}, {}) of a {}-byte file", path_.string(), offset,
               offset + length, size_);
  // mmap offsets must be page-aligned: map from the page start, point inside.
  const uint64_t start = offset - offset % page_size();
  const uint64_t span = length + (offset - start);
  void* p =
      ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd_, static_cast<off_t>(start));
  if (p == MAP_FAILED) {
    throw Error(fmt::format("{}: cannot memory-map bytes [{}, {}): {}", path_.string(), offset,
                            offset + length, errno_text()));
  }
  auto* base = static_cast<std::byte*>(p);
  return std::shared_ptr<std::byte>(base + (offset - start),
                                    [base, span](std::byte*) { ::munmap(base, span); });
}

void MappedFile::prefetch(uint64_t offset, uint64_t length) const {
  if (data_ == nullptr || length == 0 || offset >= size_) return;
  const uint64_t start = offset - offset % page_size();
  const uint64_t end = std::min(size_, offset + length);
  ::madvise(data_ + start, end - start, MADV_WILLNEED);
}

void MappedFile::release(uint64_t offset, uint64_t length) const {
  if (data_ == nullptr || length == 0 || offset >= size_) return;
  // Only pages entirely inside the range: a neighbour's bytes may share the edges.
  const uint64_t page = page_size();
  const uint64_t start = (offset + page - 1) / page * page;
  const uint64_t end = std::min(size_, offset + length) / page * page;
  if (end > start) ::madvise(data_ + start, end - start, MADV_DONTNEED);
}

}  // namespace tessel::io
