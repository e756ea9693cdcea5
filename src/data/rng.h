// Deterministic random numbers for data: synthetic tokens and epoch shuffles.
//
// std::shuffle and std::uniform_int_distribution are implementation-defined,
// so the same seed could give different data with another standard library;
// resumed and multi-rank runs need every rank, on every platform, to draw the
// same numbers. SplitMix64 (Steele, Lea, Flood 2014) is fully specified, and
// below() and shuffle() are written out here.
#pragma once

#include <cstdint>
#include <vector>

namespace tessel::data {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // Uniform in [0, n), n > 0 (rejection sampling: no modulo bias).
  uint64_t below(uint64_t n);

 private:
  uint64_t state_;
};

// A seed for stream `stream` derived from `seed` (different streams are
// statistically independent).
uint64_t derive_seed(uint64_t seed, uint64_t stream);

// Fisher-Yates shuffle of `values` driven by SplitMix64(seed).
void shuffle(std::vector<int64_t>& values, uint64_t seed);

}  // namespace tessel::data
