// The text of token ids a model generated (policy/generation.h), for
// verifiers and for printing. A model's vocabulary may be larger than its
// tokenizer's (embedding rows padded to a round number, or a byte tokenizer
// standing in for a model without tokenizer.json), and sampling can pick one
// of the ids beyond it: those have no text, and become U+FFFD (the
// replacement character) instead of an error, so a response holding one
// never matches an answer made of real text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace tessel::data {

// decode(ids) with each id outside [0, tokenizer.vocab_size()) as U+FFFD.
std::string generated_text(const Tokenizer& tokenizer, const std::vector<int64_t>& ids, bool skip_special_tokens);

}  // namespace tessel::data
