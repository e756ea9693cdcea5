// What a checkpoint records of each file it wrote, to tell on load that the
// file is still the one written: its size (a truncated copy differs) and its
// xxHash64 (a flipped bit or a zeroed block differs). Writers compute it
// from the bytes as they go (AtomicFileWriter), so a save never reads its
// files back.
#pragma once

#include <cstdint>
#include <filesystem>

namespace tessel::io {

struct FileDigest {
  uint64_t bytes = 0;
  uint64_t xxh64 = 0;
  friend bool operator==(const FileDigest&, const FileDigest&) = default;
};

// Reads the whole file. Throws tessel::Error naming it when it cannot be read.
FileDigest digest_file(const std::filesystem::path& path);

}  // namespace tessel::io
