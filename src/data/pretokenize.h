// The split step of byte-level BPE tokenizers (GPT-2, Llama-3, Qwen2/3):
// text -> pieces ("words") that BPE then encodes one by one.
//
// Hugging Face runs a regex for this. tessel recognises the three regexes
// those families ship in tokenizer.json (split_pattern_from_regex) and
// implements each as a hand-written scanner with the regex's leftmost-first
// semantics, including the look-ahead of `\s+(?!\S)`; character classes come
// from unicode.h. Any other regex is reported as unsupported, and the
// tokenizer loader then falls back to bytes.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::data {

enum class SplitPattern {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Gpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  Llama3,
  // As Llama3 with \p{N} (one digit per piece) instead of \p{N}{1,3}.
  Qwen2,
};

// The pattern a tokenizer.json regex string denotes, or nullopt when it is
// not one of the three above (compared exactly).
std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex);
const char* split_pattern_name(SplitPattern pattern);

// Pieces of `text` in order; their concatenation is `text`.
std::vector<std::string_view> pretokenize(std::string_view text, SplitPattern pattern);

}  // namespace tessel::data
