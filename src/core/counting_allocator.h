// A wrapper around ATen's CPU allocator that counts the bytes of live tensor
// storage and their high-water mark, so memory tests and benchmarks measure
// from outside the code under test (never from FSDP's own accounting).
// install() puts it in front of the default CPU allocator for the rest of the
// process; storage allocated before that is not counted (and is freed by its
// own deleter). Measurement only: nothing in the library installs it; the
// tessel program does when TESSEL_COUNT_TENSOR_BYTES=1 (install_from_env), so
// that a CPU run's metrics carry the tensors' high-water mark as a GPU run's
// carry its allocator's.
#pragma once

#include <cstdint>

namespace tessel {

class CountingCpuAllocator {
 public:
  // Idempotent. Call before allocating what is to be measured.
  static void install();
  // install() when TESSEL_COUNT_TENSOR_BYTES is 1; UsageError for a value
  // other than 0 or 1 (unset: nothing).
  static void install_from_env();
  static bool installed();
  static int64_t live_bytes();
  static int64_t peak_bytes();
  // Starts a new high-water mark at the current live bytes.
  static void reset_peak();
};

}  // namespace tessel
