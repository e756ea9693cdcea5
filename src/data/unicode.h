// UTF-8 and character classes for the byte-level BPE pre-tokenizer.
//
// Hugging Face's split regexes use \p{L}, \p{N} and \s, which std::regex
// cannot express, so the pre-tokenizer (pretokenize.h) scans code points with
// the classes below instead. The classes are exact for ASCII, Latin-1,
// general punctuation, CJK punctuation, fullwidth forms, symbols and emoji;
// elsewhere a code point counts as a letter unless it is listed as a number,
// mark or symbol (see unicode.cpp). A misclassified character only changes
// where a word is split before BPE: the ids stay valid, but may then differ
// from Hugging Face's for that text.
#pragma once

#include "core/utf8.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::data {

enum class CharClass { Letter, Number, Whitespace, Other };

// One code point of a UTF-8 text and the bytes it came from. An invalid byte
// becomes a code point of its own (class Other), so every byte of the text is
// covered exactly once.
struct CodePoint {
  char32_t value = 0;
  std::size_t offset = 0;  // first byte in the text
  std::size_t length = 0;  // bytes
  bool valid = true;
};

std::vector<CodePoint> decode_utf8(std::string_view text);

CharClass char_class(char32_t code_point);

// GPT-2's bytes_to_unicode(): byte b -> the code point byte-level BPE writes
// for it (printable Latin-1 bytes stand for themselves, the other 68 bytes
// map to U+0100.. in byte order, e.g. ' ' -> U+0120 'Ġ', '\n' -> U+010A 'Ċ').
const std::array<char32_t, 256>& byte_to_unicode();

}  // namespace tessel::data
