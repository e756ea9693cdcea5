// Encoding one Unicode code point as UTF-8. Shared by the tokenizers (byte
// symbols of byte-level BPE) and the Python-literal reader (\u escapes).
#pragma once

#include <string>

namespace tessel {

// Appends `code_point` (at most U+10FFFF; callers check surrogates) to `out`.
void append_utf8(std::string& out, char32_t code_point);

}  // namespace tessel
