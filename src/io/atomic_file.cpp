#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/errno_text.h"
#include "core/error.h"

namespace tessel::io {

void sync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path) : path_(std::move(path)) {
  // Hidden, unique, and in the target's directory so the rename stays on one file system.
  std::string pattern =
      (path_.parent_path() / ("." + path_.filename().string() + ".tmp.XXXXXX")).string();
  fd_ = ::mkstemp(pattern.data());
  if (fd_ < 0) {
    throw Error(fmt::format("{}: cannot create a temporary file in {} to write it: {}",
                            path_.string(), path_.parent_path().string(), errno_text()));
  }
  temp_path_ = pattern;
  // mkstemp creates 0600; checkpoints are meant to be read by other users and tools.
  ::fchmod(fd_, 0644);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFileWriter::write(const void* data, size_t size) {
  TESSEL_CHECK(fd_ >= 0 && !committed_, "{}: write after commit", path_.string());
  bytes_ += size;
  // Hashing is memory-bound (3.4-3.9 GB/s here, the speed of a plain sum
  // over memory): a piece hashed just before it is written is still in cache
  // when write() copies it, so there is no second pass over memory. Measured,
  // 512 MiB safetensors file on this 2-core VM, 6 interleaved runs: 0.60-0.87 s
  // to save with the hash against 0.67-1.15 s for the same bytes written and
  // fsync'ed without one (fsync dominates; the hash alone from memory: 0.13 s).
  constexpr size_t kPiece = size_t{1} << 20;
  const auto* p = static_cast<const char*>(data);
  size_t hashed = 0;  // bytes of [p, p + size) already hashed
  while (size > 0) {
    if (hashed == 0) {
      hashed = std::min(size, kPiece);
      hash_.update(p, hashed);
    }
    const ssize_t n = ::write(fd_, p, hashed);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error(fmt::format("{}: write failed: {} (is the disk full?)", path_.string(),
                              n < 0 ? errno_text() : std::string("no progress")));
    }
    p += n;
    size -= static_cast<size_t>(n);
    hashed -= static_cast<size_t>(n);
  }
}

FileDigest AtomicFileWriter::commit() {
  TESSEL_CHECK(fd_ >= 0 && !committed_, "{}: commit called twice", path_.string());
  const bool synced = ::fsync(fd_) == 0;
  const std::string sync_error = synced ? std::string() : errno_text();
  const bool closed = ::close(fd_) == 0;
  fd_ = -1;
  if (!synced || !closed) {
    throw Error(fmt::format("{}: cannot flush to disk: {}", path_.string(),
                            synced ? errno_text() : sync_error));
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    throw Error(fmt::format("{}: cannot rename the temporary file {} onto it: {}", path_.string(),
                            temp_path_.string(), errno_text()));
  }
  committed_ = true;
  sync_directory(path_.parent_path());  // the rename itself durable
  return FileDigest{bytes_, hash_.digest()};
}

FileDigest write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  AtomicFileWriter writer(path);
  writer.write(content.data(), content.size());
  return writer.commit();
}

}  // namespace tessel::io
