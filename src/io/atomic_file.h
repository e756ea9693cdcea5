// Writing a file so that readers see either the old content or the complete
// new content, never a partial file: data goes to a temporary file in the same
// directory, is flushed to disk, and is renamed over the target (rename is
// atomic within a file system). A crash mid-save leaves the old file intact.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string_view>

#include "io/file_digest.h"
#include "io/xxhash64.h"

namespace tessel::io {

class AtomicFileWriter {
 public:
  // Creates the temporary file next to `path`; the directory must exist.
  explicit AtomicFileWriter(std::filesystem::path path);
  // Removes the temporary file unless commit() succeeded.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t size);
  // Flushes, closes and renames the temporary file onto the target path.
  // Returns the size and hash of what was written (hashed as it was written).
  FileDigest commit();

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::filesystem::path temp_path_;
  int fd_ = -1;
  bool committed_ = false;
  XxHash64 hash_;
  uint64_t bytes_ = 0;
};

// fsync of a directory: makes the creations and renames inside it durable.
// Best effort (some file systems refuse).
void sync_directory(const std::filesystem::path& dir);

// The whole content at once (config.json, index files).
FileDigest write_file_atomically(const std::filesystem::path& path, std::string_view content);

}  // namespace tessel::io
