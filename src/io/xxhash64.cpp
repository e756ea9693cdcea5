#include "io/xxhash64.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace tessel::io {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kP3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// The format is little-endian; so are the machines tessel runs on, and
// memcpy compiles to one load.
inline uint64_t read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t round(uint64_t acc, uint64_t input) { return rotl(acc + input * kP2, 31) * kP1; }

inline uint64_t merge(uint64_t h, uint64_t lane) { return (h ^ round(0, lane)) * kP1 + kP4; }

// Consumes whole 32-byte stripes; returns the bytes used.
size_t stripes(uint64_t* lanes, const unsigned char* p, size_t size) {
  size_t used = 0;
  uint64_t v0 = lanes[0], v1 = lanes[1], v2 = lanes[2], v3 = lanes[3];
  for (; used + 32 <= size; used += 32) {
    v0 = round(v0, read64(p + used));
    v1 = round(v1, read64(p + used + 8));
    v2 = round(v2, read64(p + used + 16));
    v3 = round(v3, read64(p + used + 24));
  }
  lanes[0] = v0, lanes[1] = v1, lanes[2] = v2, lanes[3] = v3;
  return used;
}

}  // namespace

XxHash64::XxHash64(uint64_t seed) : seed_(seed) {
  lanes_[0] = seed + kP1 + kP2;
  lanes_[1] = seed + kP2;
  lanes_[2] = seed;
  lanes_[3] = seed - kP1;
}

void XxHash64::update(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += size;
  if (buffered_ > 0) {
    const size_t take = std::min(size, sizeof(buffer_) - buffered_);
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    size -= take;
    if (buffered_ < sizeof(buffer_)) return;
    stripes(lanes_, buffer_, sizeof(buffer_));
    buffered_ = 0;
  }
  const size_t used = stripes(lanes_, p, size);
  std::memcpy(buffer_, p + used, size - used);
  buffered_ = size - used;
}

uint64_t XxHash64::digest() const {
  uint64_t h;
  if (total_ >= 32) {
    h = rotl(lanes_[0], 1) + rotl(lanes_[1], 7) + rotl(lanes_[2], 12) + rotl(lanes_[3], 18);
    for (uint64_t lane : lanes_) h = merge(h, lane);
  } else {
    h = seed_ + kP5;
  }
  h += total_;
  const unsigned char* p = buffer_;
  size_t left = buffered_;
  for (; left >= 8; p += 8, left -= 8) h = rotl(h ^ round(0, read64(p)), 27) * kP1 + kP4;
  if (left >= 4) {
    h = rotl(h ^ (static_cast<uint64_t>(read32(p)) * kP1), 23) * kP2 + kP3;
    p += 4;
    left -= 4;
  }
  for (; left > 0; ++p, --left) h = rotl(h ^ (*p * kP5), 11) * kP1;
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

uint64_t xxhash64(const void* data, size_t size, uint64_t seed) {
  XxHash64 h(seed);
  h.update(data, size);
  return h.digest();
}

std::string hash_hex(uint64_t hash) { return fmt::format("{:016x}", hash); }

}  // namespace tessel::io
