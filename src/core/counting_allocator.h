// A wrapper around ATen's CPU allocator that counts the bytes of live tensor
// storage and their high-water mark, so memory tests and benchmarks measure
// from outside the code under test (never from FSDP's own accounting).
// install() puts it in front of the default CPU allocator for the rest of the
// process; storage allocated before that is not counted (and is freed by its
// own deleter). Measurement only: nothing in the library installs it.
#pragma once

#include <cstdint>

namespace tessel {

class CountingCpuAllocator {
 public:
  // Idempotent. Call before allocating what is to be measured.
  static void install();
  static int64_t live_bytes();
  static int64_t peak_bytes();
  // Starts a new high-water mark at the current live bytes.
  static void reset_peak();
};

}  // namespace tessel
