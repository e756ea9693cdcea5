#include "data/unicode.h"

namespace tessel::data {
namespace {

struct Range {
  char32_t first;
  char32_t last;
};

bool in_ranges(char32_t c, const Range* ranges, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (c >= ranges[i].first && c <= ranges[i].last) return true;
  }
  return false;
}

// Unicode White_Space (what \s matches in the Rust/Oniguruma regexes HF uses).
constexpr Range kWhitespace[] = {
    {0x09, 0x0D},     {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680},
    {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};

// \p{N} outside ASCII: Latin-1 superscripts and fractions, decimal digits of
// the common scripts, superscripts/subscripts, number forms, circled numbers,
// CJK numerals that are Nl, fullwidth digits.
constexpr Range kNumbers[] = {
    {0xB2, 0xB3},     {0xB9, 0xB9},     {0xBC, 0xBE},     {0x0660, 0x0669}, {0x06F0, 0x06F9},
    {0x07C0, 0x07C9}, {0x0966, 0x096F}, {0x09E6, 0x09EF}, {0x0A66, 0x0A6F}, {0x0AE6, 0x0AEF},
    {0x0B66, 0x0B6F}, {0x0BE6, 0x0BF2}, {0x0C66, 0x0C6F}, {0x0CE6, 0x0CEF}, {0x0D66, 0x0D6F},
    {0x0E50, 0x0E59}, {0x0ED0, 0x0ED9}, {0x0F20, 0x0F33}, {0x1040, 0x1049}, {0x17E0, 0x17E9},
    {0x1810, 0x1819}, {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2150, 0x2182},
    {0x2185, 0x2189}, {0x2460, 0x249B}, {0x24EA, 0x24FF}, {0x2776, 0x2793}, {0x3007, 0x3007},
    {0x3021, 0x3029}, {0x3038, 0x303A}, {0x3192, 0x3195}, {0x3220, 0x3229}, {0x3248, 0x324F},
    {0x3251, 0x325F}, {0x3280, 0x3289}, {0x32B1, 0x32BF}, {0xFF10, 0xFF19}};

// Neither letter, number nor whitespace: Latin-1 punctuation and symbols,
// combining marks, spacing modifier symbols, punctuation of common scripts,
// general punctuation (with the zero-width format characters U+200B-U+200F:
// the joiner inside emoji sequences is not a letter), currency,
// arrows/math/technical/box/shapes/dingbats, CJK punctuation, private use, variation selectors, fullwidth punctuation,
// specials, emoji and pictographs.
constexpr Range kOther[] = {
    {0x80, 0x84},     {0x86, 0x9F},       {0xA1, 0xA9},       {0xAB, 0xB1},       {0xB4, 0xB4},
    {0xB6, 0xB8},     {0xBB, 0xBB},       {0xBF, 0xBF},       {0xD7, 0xD7},       {0xF7, 0xF7},
    {0x02C2, 0x02C5}, {0x02D2, 0x02DF},   {0x02E5, 0x02EB},   {0x02ED, 0x02ED},   {0x02EF, 0x036F},
    {0x0483, 0x0489}, {0x055A, 0x055F},   {0x0589, 0x058A},   {0x0591, 0x05C7},   {0x05F3, 0x05F4},
    {0x0600, 0x061F}, {0x064B, 0x065F},   {0x066A, 0x066D},   {0x0670, 0x0670},   {0x06D4, 0x06D4},
    {0x06D6, 0x06ED}, {0x0900, 0x0903},   {0x093A, 0x094F},   {0x0951, 0x0957},   {0x0962, 0x0965},
    {0x0970, 0x0970}, {0x0E31, 0x0E31},   {0x0E34, 0x0E3A},   {0x0E3F, 0x0E3F},   {0x0E47, 0x0E4F},
    {0x0E5A, 0x0E5B}, {0x1AB0, 0x1AFF},   {0x1DC0, 0x1DFF},   {0x200B, 0x2027},   {0x2030, 0x205E},
    {0x2060, 0x206F}, {0x207A, 0x207E},   {0x208A, 0x208E},   {0x20A0, 0x20FF},   {0x2190, 0x245F},
    {0x249C, 0x24E9}, {0x2500, 0x2775},   {0x2794, 0x2BFF},   {0x2E00, 0x2E7F},   {0x3001, 0x3004},
    {0x3008, 0x3020}, {0x302A, 0x3030},   {0x303D, 0x303F},   {0x3099, 0x309C},   {0x30A0, 0x30A0},
    {0x30FB, 0x30FB}, {0xD800, 0xF8FF},   {0xFE00, 0xFE0F},   {0xFE10, 0xFE19},   {0xFE20, 0xFE6F},
    {0xFEFF, 0xFEFF}, {0xFF01, 0xFF0F},   {0xFF1A, 0xFF20},   {0xFF3B, 0xFF40},   {0xFF5B, 0xFF65},
    {0xFFE0, 0xFFFF}, {0x1F000, 0x1FAFF}, {0xE0000, 0xE007F}, {0xF0000, 0x10FFFF}};

}  // namespace

std::vector<CodePoint> decode_utf8(std::string_view text) {
  std::vector<CodePoint> out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    std::size_t len = 0;
    char32_t cp = 0;
    if (b0 < 0x80) {
      len = 1;
      cp = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      len = 2;
      cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3;
      cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      len = 4;
      cp = b0 & 0x07;
    }
    bool valid = len > 0 && i + len <= text.size();
    for (std::size_t k = 1; valid && k < len; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xC0) != 0x80) valid = false;
      cp = (cp << 6) | (b & 0x3F);
    }
    // Overlong forms and surrogates are invalid UTF-8 too.
    if (valid &&
        ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
         (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))) {
      valid = false;
    }
    if (!valid) {
      out.push_back({static_cast<char32_t>(b0), i, 1, false});
      ++i;
    } else {
      out.push_back({cp, i, len, true});
      i += len;
    }
  }
  return out;
}

CharClass char_class(char32_t c) {
  if (c < 0x80) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CharClass::Letter;
    if (c >= '0' && c <= '9') return CharClass::Number;
    if ((c >= 0x09 && c <= 0x0D) || c == ' ') return CharClass::Whitespace;
    return CharClass::Other;
  }
  if (in_ranges(c, kWhitespace, std::size(kWhitespace))) return CharClass::Whitespace;
  if (in_ranges(c, kNumbers, std::size(kNumbers))) return CharClass::Number;
  if (in_ranges(c, kOther, std::size(kOther))) return CharClass::Other;
  return CharClass::Letter;
}

const std::array<char32_t, 256>& byte_to_unicode() {
  static const std::array<char32_t, 256> table = [] {
    std::array<char32_t, 256> t{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      t[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

}  // namespace tessel::data
