#include "data/pretokenize.h"

#include "data/unicode.h"

namespace tessel::data {
namespace {

constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Scans one text; every match_* returns the number of code points matched at
// position i (0 = the alternative does not match there).
class Scanner {
 public:
  Scanner(std::string_view text, SplitPattern pattern)
      : text_(text), cps_(decode_utf8(text)), pattern_(pattern) {}

  std::vector<std::string_view> run() {
    std::vector<std::string_view> pieces;
    std::size_t i = 0;
    while (i < cps_.size()) {
      const std::size_t n = match_at(i);
      const std::size_t begin = cps_[i].offset;
      const std::size_t end = cps_[i + n - 1].offset + cps_[i + n - 1].length;
      pieces.push_back(text_.substr(begin, end - begin));
      i += n;
    }
    return pieces;
  }

 private:
  char32_t at(std::size_t i) const { return i < cps_.size() ? cps_[i].value : 0; }
  bool exists(std::size_t i) const { return i < cps_.size(); }
  CharClass cls(std::size_t i) const {
    // Invalid bytes are neither letters, numbers nor whitespace.
    return cps_[i].valid ? char_class(cps_[i].value) : CharClass::Other;
  }
  bool is(std::size_t i, CharClass c) const { return exists(i) && cls(i) == c; }
  bool is_newline(std::size_t i) const { return exists(i) && (at(i) == '\r' || at(i) == '\n'); }
  std::size_t run_of(std::size_t i, CharClass c) const {
    std::size_t j = i;
    while (is(j, c)) ++j;
    return j - i;
  }

  std::size_t match_at(std::size_t i) const {
    if (std::size_t n = contraction(i)) return n;
    const bool gpt2 = pattern_ == SplitPattern::Gpt2;
    if (gpt2) {
      // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
      for (CharClass c : {CharClass::Letter, CharClass::Number, CharClass::Other}) {
        const std::size_t space = at(i) == ' ' && is(i + 1, c) ? 1 : 0;
        if (std::size_t n = run_of(i + space, c)) return space + n;
      }
    } else {
      // `[^\r\n\p{L}\p{N}]?\p{L}+`
      const bool prefix = exists(i) && !is_newline(i) && !is(i, CharClass::Letter) &&
                          !is(i, CharClass::Number) && is(i + 1, CharClass::Letter);
      if (std::size_t n = run_of(i + (prefix ? 1 : 0), CharClass::Letter)) return n + prefix;
      // `\p{N}{1,3}` or `\p{N}`
      const std::size_t max_digits = pattern_ == SplitPattern::Llama3 ? 3 : 1;
      if (std::size_t n = run_of(i, CharClass::Number)) return std::min(n, max_digits);
      // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
      const std::size_t space = at(i) == ' ' && is(i + 1, CharClass::Other) ? 1 : 0;
      if (std::size_t n = run_of(i + space, CharClass::Other)) {
        std::size_t j = i + space + n;
        while (is_newline(j)) ++j;
        return j - i;
      }
    }
    const std::size_t ws = run_of(i, CharClass::Whitespace);
    if (ws == 0) return 1;  // unreachable: every class is covered above
    if (!gpt2) {
      // `\s*[\r\n]+`: greedy \s* backtracks to the last newline of the run.
      for (std::size_t k = ws; k > 0; --k) {
        if (is_newline(i + k - 1)) return k;
      }
    }
    // `\s+(?!\S)`: the whole run at the end of the text, else the run less
    // its last character (which then prefixes the next word); a single
    // whitespace before a non-space falls through to `\s+`.
    if (!exists(i + ws) || ws == 1) return ws;
    return ws - 1;
  }

  // 's 't 're 've 'm 'll 'd (case-insensitive except in GPT-2).
  std::size_t contraction(std::size_t i) const {
    if (at(i) != '\'') return 0;
    const bool fold = pattern_ != SplitPattern::Gpt2;
    auto lower = [&](std::size_t k) -> char32_t {
      const char32_t c = at(k);
      return fold && c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
    };
    const char32_t a = lower(i + 1);
    const char32_t b = lower(i + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  std::string_view text_;
  std::vector<CodePoint> cps_;
  SplitPattern pattern_;
};

}  // namespace

std::optional<SplitPattern> split_pattern_from_regex(std::string_view regex) {
  if (regex == kGpt2Regex) return SplitPattern::Gpt2;
  if (regex == kLlama3Regex) return SplitPattern::Llama3;
  if (regex == kQwen2Regex) return SplitPattern::Qwen2;
  return std::nullopt;
}

const char* split_pattern_name(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::Gpt2:
      return "GPT-2";
    case SplitPattern::Llama3:
      return "Llama-3";
    case SplitPattern::Qwen2:
      return "Qwen2";
  }
  return "?";
}

std::vector<std::string_view> pretokenize(std::string_view text, SplitPattern pattern) {
  return Scanner(text, pattern).run();
}

}  // namespace tessel::data
