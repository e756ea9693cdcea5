#include "data/rng.h"

#include <utility>

namespace tessel::data {

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::below(uint64_t n) {
  // Values under `threshold` would make some residues more likely.
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    const uint64_t r = next();
    if (r >= threshold) return r % n;
  }
}

uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  SplitMix64 a(seed);
  SplitMix64 b(a.next() ^ (stream * 0xD1B54A32D192ED03ULL));
  return b.next();
}

void shuffle(std::vector<int64_t>& values, uint64_t seed) {
  SplitMix64 rng(seed);
  for (std::size_t i = values.size(); i > 1; --i) {
    const auto j = static_cast<std::size_t>(rng.below(i));
    std::swap(values[i - 1], values[j]);
  }
}

}  // namespace tessel::data
