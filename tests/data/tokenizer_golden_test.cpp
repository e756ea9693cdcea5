// tessel's tokenizer (data/bpe_tokenizer.h) against Hugging Face `tokenizers`
// itself: tokenizer.json files trained by HF in tests/golden/generate_tokenizers.py
// (byte-level BPE with GPT-2's split, with Llama-3's regex and ignore_merges,
// with Qwen2's regex and NFC; special and plain added tokens), each with HF's
// ids for about 95 strings (Unicode, emoji, whitespace runs, digits, code):
// tessel's ids must be HF's exactly. The SentencePiece-style Metaspace one is
// not implemented and must be refused with the reason, not encoded wrongly.
// (`tessel tokenize` on these files: tests/cli/tokenize_cli_test.cpp.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "support/source_tree.h"

namespace tessel::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path case_dir(const std::string& name) {
  return test_support::golden_dir("tokenizers") / name;
}

json expected(const std::string& name) { return json::parse(std::ifstream(case_dir(name) / "expected.json")); }

class TokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGolden, IdsEqualHuggingFaceTokenizers) {
  std::string why;
  const auto tokenizer = read_bpe_tokenizer(case_dir(GetParam()), why);
  ASSERT_TRUE(tokenizer) << why;
  const json want = expected(GetParam());
  ASSERT_GT(want["strings"].size(), 90u);
  for (size_t i = 0; i < want["strings"].size(); ++i) {
    const std::string text = want["strings"][i].get<std::string>();
    EXPECT_EQ(tokenizer->encode(text), want["ids"][i].get<std::vector<int64_t>>()) << json(text).dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Hf, TokenizerGolden, ::testing::Values("gpt2", "llama3", "qwen2"));

TEST(TokenizerGoldenMetaspace, IsRefusedWithTheReason) {
  std::string why;
  EXPECT_FALSE(read_bpe_tokenizer(case_dir("metaspace"), why));
  EXPECT_THAT(why, ::testing::HasSubstr("Metaspace"));
}

}  // namespace
}  // namespace tessel::data
