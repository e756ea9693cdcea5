// A safetensors file's header: the 8-byte little-endian header length N, N
// bytes of JSON, then the data buffer, whose size bounds every tensor's
// data_offsets. io/safetensors_header.h holds every check on untrusted header
// content (the file reader trusts what it accepts). The file reader itself
// includes <ATen/ATen.h>, which clang 14 cannot compile as C++20 (fuzz/README.md),
// so this target splits the input as the reader does and parses the header.
#include <cstring>
#include <string_view>

#include "fuzz_input.h"
#include "io/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, data, 8);
  if (header_bytes > size - 8) return 0;  // the reader refuses this before parsing
  const std::string_view json(reinterpret_cast<const char*>(data) + 8, header_bytes);
  const uint64_t data_bytes = size - 8 - header_bytes;
  tessel::fuzz::expect_only_tessel_errors([&] {
    const auto header = tessel::io::parse_safetensors_header(json, data_bytes, "fuzz.safetensors");
    for (const auto& t : header.tensors) {
      // What the reader relies on: every tensor inside the data buffer.
      if (t.data_end > data_bytes || t.data_begin > t.data_end) std::abort();
      (void)t.numel();
    }
  });
  return 0;
}
