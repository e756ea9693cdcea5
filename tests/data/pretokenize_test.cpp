// Pre-tokenizer splits against pieces worked out by hand from the regexes in
// pretokenize.h, and the GPT-2 byte map against its published values.
#include "data/pretokenize.h"

#include <gtest/gtest.h>

#include "data/unicode.h"

namespace tessel::data {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(std::string_view text, SplitPattern pattern) {
  Pieces out;
  for (auto piece : pretokenize(text, pattern)) out.emplace_back(piece);
  return out;
}

TEST(Pretokenize, Gpt2) {
  EXPECT_EQ(split("Hello world", SplitPattern::Gpt2), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("it's  2024!\n", SplitPattern::Gpt2),
            (Pieces{"it", "'s", " ", " 2024", "!", "\n"}));
  EXPECT_EQ(split("Hi\n\n  there", SplitPattern::Gpt2), (Pieces{"Hi", "\n\n ", " there"}));
  EXPECT_EQ(split("I'LL", SplitPattern::Gpt2), (Pieces{"I", "'", "LL"}));
  EXPECT_EQ(split("(hello)", SplitPattern::Gpt2), (Pieces{"(", "hello", ")"}));
  EXPECT_EQ(split("caf\u00e9 \u00fcber", SplitPattern::Gpt2), (Pieces{"caf\u00e9", " \u00fcber"}));
  EXPECT_EQ(split("trailing  ", SplitPattern::Gpt2), (Pieces{"trailing", "  "}));
}

TEST(Pretokenize, Llama3) {
  EXPECT_EQ(split("Hello world", SplitPattern::Llama3), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("it's  2024!\n", SplitPattern::Llama3),
            (Pieces{"it", "'s", " ", " ", "202", "4", "!\n"}));
  EXPECT_EQ(split("Hi\n\n  there", SplitPattern::Llama3), (Pieces{"Hi", "\n\n", " ", " there"}));
  EXPECT_EQ(split("I'LL", SplitPattern::Llama3), (Pieces{"I", "'LL"}));
  EXPECT_EQ(split("(hello)", SplitPattern::Llama3), (Pieces{"(hello", ")"}));
  EXPECT_EQ(split("\u65e5\u672c\u8a9e\u3002", SplitPattern::Llama3),
            (Pieces{"\u65e5\u672c\u8a9e", "\u3002"}));
}

TEST(Pretokenize, Qwen2SplitsDigitsOneByOne) {
  EXPECT_EQ(split("it's  2024!\n", SplitPattern::Qwen2),
            (Pieces{"it", "'s", " ", " ", "2", "0", "2", "4", "!\n"}));
}

TEST(Pretokenize, PiecesCoverInvalidUtf8) {
  const std::string text = "a\xff\xfe b";
  std::string joined;
  for (auto piece : pretokenize(text, SplitPattern::Llama3)) joined += piece;
  EXPECT_EQ(joined, text);
}

TEST(Pretokenize, RecognisesShippedRegexes) {
  EXPECT_EQ(split_pattern_from_regex(
                R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"),
            SplitPattern::Gpt2);
  EXPECT_EQ(
      split_pattern_from_regex(
          R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"),
      SplitPattern::Llama3);
  EXPECT_EQ(split_pattern_from_regex(R"(\w+)"), std::nullopt);
}

TEST(ByteToUnicode, PublishedGpt2Values) {
  const auto& map = byte_to_unicode();
  EXPECT_EQ(map[0x20], 0x120u);  // 'Ġ'
  EXPECT_EQ(map[0x0A], 0x10Au);  // 'Ċ'
  EXPECT_EQ(map[0x00], 0x100u);  // 'Ā'
  EXPECT_EQ(map[0x7F], 0x121u);  // 'ġ'
  EXPECT_EQ(map[0xAD], 0x143u);  // 'Ń' (soft hyphen)
  EXPECT_EQ(map['!'], static_cast<char32_t>('!'));
  EXPECT_EQ(map[0xFF], 0xFFu);
}

}  // namespace
}  // namespace tessel::data
