#include "io/file_digest.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "io/xxhash64.h"

namespace tessel::io {

FileDigest digest_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot read {}: {}", path.string(), std::strerror(errno)));
  // Sequential reads through one buffer: each page is touched once and the
  // process's resident set does not grow with the file, unlike a mapping.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<char> buffer(size_t{4} << 20);
  XxHash64 hash;
  FileDigest out;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw Error(fmt::format("cannot read {}: {}", path.string(), why));
    }
    if (n == 0) break;
    hash.update(buffer.data(), static_cast<size_t>(n));
    out.bytes += static_cast<uint64_t>(n);
  }
  ::close(fd);
  out.xxh64 = hash.digest();
  return out;
}

}  // namespace tessel::io
