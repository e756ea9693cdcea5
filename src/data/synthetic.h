// dataset_name "synthetic": random tokens for smoke tests and benchmarks.
//
// Example i of a split is a pure function of (seed, split, i): tokens are
// uniform in [0, vocab_size) drawn from SplitMix64(derive_seed(...)), every
// token is a target (loss_mask all 1), no bos/eos. Nothing is learnable, so
// the loss stays near log(vocab_size); use demo_sft to watch a loss fall.
#pragma once

#include <cstdint>
#include <string>

#include "data/dataset.h"

namespace tessel::data {

// Throws tessel::UsageError when vocab_size, the sequence length or the
// number of examples is not positive.
Dataset make_synthetic_dataset(uint64_t seed, const std::string& split, int64_t num_examples,
                               int64_t sequence_length, int64_t vocab_size);

}  // namespace tessel::data
