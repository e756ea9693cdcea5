// `tessel tokenize` end to end (the built binary): on a tokenizer.json trained
// by Hugging Face `tokenizers` (tests/golden/tokenizers, generate_tokenizers.py)
// it prints HF's ids for a text with an added token inside; a tokenizer.json
// tessel does not implement (Metaspace) exits 2 naming what.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_tessel.h"
#include "support/source_tree.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path case_dir(const std::string& name) {
  return tessel::test_support::golden_dir("tokenizers") / name;
}

TEST(TokenizeCommand, PrintsHuggingFacesIds) {
  const json want = json::parse(std::ifstream(case_dir("qwen2") / "expected.json"));
  const size_t last = want["strings"].size() - 1;  // "call <think> now": an added token inside text
  const auto r = tessel::test_support::run_tessel("tokenize '" + case_dir("qwen2").string() + "' --json --text '" +
                                                      want["strings"][last].get<std::string>() + "'",
                                                  /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json got = json::parse(r.output);
  EXPECT_EQ(got["ids"], want["ids"][last]);
  EXPECT_EQ(got["pieces"].size(), want["ids"][last].size());
}

TEST(TokenizeCommand, RefusesATokenizerItDoesNotImplement) {
  const auto r = tessel::test_support::run_tessel("tokenize '" + case_dir("metaspace").string() + "' --text hi");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("Metaspace"));
}

}  // namespace
