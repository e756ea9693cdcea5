#include "data/synthetic.h"

#include <fmt/format.h>

#include "core/error.h"
#include "data/rng.h"

namespace tessel::data {
namespace {

// FNV-1a: std::hash is implementation-defined, and the split's stream must be
// the same everywhere.
uint64_t fnv1a(const std::string& text) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ULL;
  }
  return h;
}

}  // namespace

Dataset make_synthetic_dataset(uint64_t seed, const std::string& split, int64_t num_examples,
                               int64_t sequence_length, int64_t vocab_size) {
  if (vocab_size <= 0 || sequence_length <= 0 || num_examples <= 0) {
    throw UsageError(fmt::format(
        "synthetic dataset needs a positive vocab size, sequence length and example count "
        "(got vocab {}, length {}, examples {}); set data.max_input_seq_length",
        vocab_size, sequence_length, num_examples));
  }
  // Splits get different streams so validation never repeats training rows.
  const uint64_t split_stream = split == "train" ? 0 : fnv1a(split) | 1;
  const uint64_t split_seed = derive_seed(seed, split_stream);
  std::vector<Example> examples(static_cast<std::size_t>(num_examples));
  for (int64_t i = 0; i < num_examples; ++i) {
    SplitMix64 rng(derive_seed(split_seed, static_cast<uint64_t>(i)));
    Example& example = examples[static_cast<std::size_t>(i)];
    example.tokens.resize(static_cast<std::size_t>(sequence_length));
    for (auto& token : example.tokens) {
      token = static_cast<int64_t>(rng.below(static_cast<uint64_t>(vocab_size)));
    }
    example.loss_mask.assign(example.tokens.size(), 1);
  }
  return Dataset(fmt::format("synthetic({})", split), std::move(examples));
}

}  // namespace tessel::data
