// Builds safetensors bytes by hand, independently of tessel's writer: the test
// spells out the JSON header text and the little-endian data, so the reader is
// checked against the format itself, and malformed files are easy to make.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tessel::io::testing {

// 8-byte little-endian length of `header`, the header, then `data`.
inline std::string safetensors_bytes(const std::string& header, const std::string& data,
                                     uint64_t declared_length = UINT64_MAX) {
  const uint64_t n = declared_length == UINT64_MAX ? header.size() : declared_length;
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + header + data;
}

// Little-endian bytes of floats (IEEE 754 binary32; the test host is x86/ARM LE).
inline std::string float_bytes(const std::vector<float>& values) {
  std::string out(values.size() * 4, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &values[i], 4);
    for (int b = 0; b < 4; ++b) out[i * 4 + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  return out;
}

// Little-endian bytes of raw 16-bit patterns (for hand-written bf16/f16 values).
inline std::string u16_bytes(const std::vector<uint16_t>& values) {
  std::string out;
  for (auto v : values) {
    out.push_back(static_cast<char>(v & 0xff));
    out.push_back(static_cast<char>(v >> 8));
  }
  return out;
}

}  // namespace tessel::io::testing
