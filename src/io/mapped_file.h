// A whole file mapped read-only into memory. Reading a tensor out of a
// safetensors file is then one memcpy from the page cache (no read buffer in
// between), and a rank that needs only a slice touches only those pages.
// The mapping lives as long as the last shared_ptr to it, so tensors that
// borrow file memory can keep it alive through their deleter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

namespace tessel::io {

class MappedFile {
 public:
  // Maps `path` (read-only). Throws tessel::Error naming the file when it
  // cannot be opened, is not a regular file, or cannot be mapped.
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }

  // A private copy-on-write mapping of bytes [offset, offset + length) of the
  // file: reading costs nothing until touched, and writes through it change
  // neither the file nor data(). Unmapped when the last owner lets go.
  // Requires length > 0 and the range inside the file.
  std::shared_ptr<std::byte> map_private(uint64_t offset, uint64_t length) const;

  // Hints the kernel to read [offset, offset + length) ahead, so a large copy
  // is not a sequence of single-page faults. Advisory; never fails.
  void prefetch(uint64_t offset, uint64_t length) const;

  // Drops this process's mapping of the whole pages inside [offset, offset +
  // length) (the page cache keeps them; a later read faults them back in). A
  // rank that copied its shard out calls it so that its resident set holds
  // what it copied, not the file pages it read through. Advisory; never fails.
  void release(uint64_t offset, uint64_t length) const;

 private:
  MappedFile(std::filesystem::path path, int fd, std::byte* data, uint64_t size);

  std::filesystem::path path_;
  int fd_;  // kept open for map_private()
  std::byte* data_;
  uint64_t size_;
};

}  // namespace tessel::io
