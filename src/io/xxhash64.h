// xxHash64 (Yann Collet's non-cryptographic hash, the published algorithm),
// written here: the checksum of every checkpoint file. It catches the damage
// files suffer after a save (a truncated copy, a flipped bit, a block of
// zeros from a full disk) at memory speed: ~4 x 64-bit lanes per 32 bytes,
// so hashing while writing costs little next to the write itself. Not a
// defence against deliberate tampering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessel::io {

// Streaming form: update() with consecutive pieces gives the hash of their
// concatenation, whatever the piece sizes.
class XxHash64 {
 public:
  explicit XxHash64(uint64_t seed = 0);
  void update(const void* data, size_t size);
  uint64_t digest() const;

 private:
  uint64_t lanes_[4];
  unsigned char buffer_[32];  // a stripe not yet complete
  size_t buffered_ = 0;
  uint64_t total_ = 0;
  uint64_t seed_;
};

uint64_t xxhash64(const void* data, size_t size, uint64_t seed = 0);

// 16 lowercase hex digits, as xxhsum prints it.
std::string hash_hex(uint64_t hash);

}  // namespace tessel::io
