// Byte and BPE tokenizers against ids worked out by hand (the BPE vocabulary
// and merges below are small enough to follow merge by merge).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/generated_text.h"
#include "data/tokenizer.h"
#include "data_test_util.h"

namespace tessel::data {
namespace {

using testing::expect_error_mentions;
using testing::TempDir;
using testing::write_file;
using Ids = std::vector<int64_t>;

// A model may sample ids its tokenizer does not have (a larger embedding):
// they read as U+FFFD, between the decoded runs of the known ids.
TEST(GeneratedText, IdsBeyondTheTokenizerReadAsTheReplacementCharacter) {
  ByteTokenizer tok(300);
  std::vector<int64_t> ids = tok.encode("19");
  ids.push_back(tok.vocab_size());  // the first id it does not have
  for (int64_t id : tok.encode("x")) ids.push_back(id);
  ids.push_back(-1);
  EXPECT_EQ(generated_text(tok, ids, true), "19\xEF\xBF\xBDx\xEF\xBF\xBD");
  EXPECT_EQ(generated_text(tok, tok.encode("abc"), true), "abc");
  EXPECT_EQ(generated_text(tok, {}, true), "");
}

TEST(ByteTokenizer, IdsAreBytesWithDedicatedSpecials) {
  ByteTokenizer tok(300);
  EXPECT_EQ(tok.encode("Hi\n\xc3\xa9"), (Ids{72, 105, 10, 0xC3, 0xA9}));
  EXPECT_EQ(tok.bos_id(), 256);
  EXPECT_EQ(tok.eos_id(), 257);
  EXPECT_EQ(tok.pad_id(), 258);
  EXPECT_EQ(tok.vocab_size(), 259);
  EXPECT_EQ(tok.decode({256, 72, 105, 257}), "<|bos|>Hi<|eos|>");
  EXPECT_EQ(tok.decode({256, 72, 105, 257}, /*skip_special_tokens=*/true), "Hi");
}

TEST(ByteTokenizer, Vocab256ReusesControlBytes) {
  ByteTokenizer tok(256);
  EXPECT_EQ(tok.bos_id(), 2);
  EXPECT_EQ(tok.eos_id(), 3);
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_EQ(tok.vocab_size(), 256);
}

TEST(ByteTokenizer, RoundTripsEveryByte) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  for (int64_t vocab : {256, 259}) {
    ByteTokenizer tok(vocab);
    EXPECT_EQ(tok.decode(tok.encode(all)), all) << "vocab " << vocab;
  }
}

TEST(ByteTokenizer, RejectsSmallVocab) {
  expect_error_mentions<UsageError>([] { ByteTokenizer tok(100); }, {"256", "100"});
}

// Vocabulary: the 8 symbols of "hello world" plus merges
//   0 "h e"  1 "l l"  2 "he ll"  3 "hell o"  4 "Ġ w"  5 "o r"  6 "Ġw or"
nlohmann::json small_tokenizer_json(const nlohmann::json& pre_tokenizer, bool ignore_merges) {
  nlohmann::json vocab = {{"h", 0},     {"e", 1},      {"l", 2},   {"o", 3},   {"w", 4},
                          {"r", 5},     {"d", 6},      {"Ġ", 7},   {"he", 8},  {"ll", 9},
                          {"hell", 10}, {"hello", 11}, {"Ġw", 12}, {"or", 13}, {"Ġwor", 14},
                          {"Ċ", 16},    {"ab", 17},    {"a", 18},  {"b", 19}};
  return {{"version", "1.0"},
          {"added_tokens", {{{"id", 15}, {"content", "<|endoftext|>"}, {"special", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre_tokenizer},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"ignore_merges", ignore_merges},
            {"vocab", vocab},
            {"merges", {"h e", "l l", "he ll", "hell o", "Ġ w", {"o", "r"}, "Ġw or"}}}}};
}

const nlohmann::json kGpt2PreTokenizer = {
    {"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};

const nlohmann::json kLlama3PreTokenizer = {
    {"type", "Sequence"},
    {"pretokenizers",
     {{{"type", "Split"},
       {"pattern",
        {{"Regex",
          R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
       {"behavior", "Isolated"},
       {"invert", false}},
      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};

void write_tokenizer_dir(const TempDir& dir, const nlohmann::json& tokenizer) {
  write_file(dir / "tokenizer.json", tokenizer.dump());
  write_file(dir / "tokenizer_config.json",
             R"({"bos_token": {"content": "<|endoftext|>"}, "eos_token": "<|endoftext|>"})");
}

// Found by fuzz/tokenizer_json: JSON that is not an object (or any value of
// an unexpected type) escaped as nlohmann's type_error, naming no file.
TEST(BpeTokenizer, UnexpectedStructureNamesTheFile) {
  for (const std::string text : {"5", "[1, 2]", R"({"model": 3})", R"({"model": {"type": 7}})"}) {
    TempDir dir;
    write_file(dir / "tokenizer.json", text);
    std::string why;
    expect_error_mentions([&] { read_bpe_tokenizer(dir.path(), why); },
                          {"tokenizer.json", "unexpected structure"});
  }
}

TEST(BpeTokenizer, EncodesByMergeRank) {
  TempDir dir;
  write_tokenizer_dir(dir, small_tokenizer_json(kGpt2PreTokenizer, false));
  auto tok = load_tokenizer(dir.path().string(), 32);
  ASSERT_EQ(tok->vocab_size(), 20);
  // "hello" -> he l l o -> he ll o -> hell o -> hello;
  // " world" -> Ġw o r l d -> Ġw or l d -> Ġwor l d.
  EXPECT_EQ(tok->encode("hello world"), (Ids{11, 14, 2, 6}));
  EXPECT_EQ(tok->encode("hello\n"), (Ids{11, 16}));
  EXPECT_EQ(tok->encode("hello<|endoftext|>hello"), (Ids{11, 15, 11}));
  // Without ignore_merges "ab" is built from merges only, and none exists.
  EXPECT_EQ(tok->encode("ab"), (Ids{18, 19}));
  EXPECT_EQ(tok->bos_id(), 15);
  EXPECT_EQ(tok->eos_id(), 15);
  EXPECT_EQ(tok->pad_id(), 15);
}

TEST(BpeTokenizer, DecodeRoundTrip) {
  TempDir dir;
  write_tokenizer_dir(dir, small_tokenizer_json(kGpt2PreTokenizer, false));
  auto tok = load_tokenizer(dir.path().string(), 20);
  const std::string text = "hello world\nhello<|endoftext|>";
  EXPECT_EQ(tok->decode(tok->encode(text)), text);
  EXPECT_EQ(tok->decode(tok->encode(text), /*skip_special_tokens=*/true), "hello world\nhello");
}

TEST(BpeTokenizer, Llama3SplitAndIgnoreMerges) {
  TempDir dir;
  write_tokenizer_dir(dir, small_tokenizer_json(kLlama3PreTokenizer, true));
  auto tok = load_tokenizer(dir.path().string(), 20);
  EXPECT_EQ(tok->encode("hello world"), (Ids{11, 14, 2, 6}));
  // ignore_merges: a piece that is itself in the vocabulary is one token.
  EXPECT_EQ(tok->encode("ab"), (Ids{17}));
}

TEST(BpeTokenizer, ByteMissingFromVocabIsAnError) {
  TempDir dir;
  write_tokenizer_dir(dir, small_tokenizer_json(kGpt2PreTokenizer, false));
  auto tok = load_tokenizer(dir.path().string(), 20);
  expect_error_mentions([&] { tok->encode("z"); }, {"0x7a", "tokenizer.json"});
}

TEST(BpeTokenizer, SpecialIdsFromConfigJson) {
  TempDir dir;
  write_file(dir / "tokenizer.json", small_tokenizer_json(kGpt2PreTokenizer, false).dump());
  write_file(dir / "config.json", R"({"bos_token_id": 8, "eos_token_id": [15, 16]})");
  auto tok = load_tokenizer(dir.path().string(), 20);
  EXPECT_EQ(tok->bos_id(), 8);
  EXPECT_EQ(tok->eos_id(), 15);
  EXPECT_EQ(tok->pad_id(), 15);
}

TEST(BpeTokenizer, MissingEosIsAnError) {
  TempDir dir;
  write_file(dir / "tokenizer.json", small_tokenizer_json(kGpt2PreTokenizer, false).dump());
  expect_error_mentions<UsageError>([&] { load_tokenizer(dir.path().string(), 20); },
                                    {"eos", "tokenizer_config.json"});
}

TEST(LoadTokenizer, TooSmallModelVocabIsAnError) {
  TempDir dir;
  write_tokenizer_dir(dir, small_tokenizer_json(kGpt2PreTokenizer, false));
  expect_error_mentions<UsageError>([&] { load_tokenizer(dir.path().string(), 10); }, {"19", "10"});
}

TEST(LoadTokenizer, UnsupportedFallsBackToBytes) {
  TempDir dir;
  auto json = small_tokenizer_json(kGpt2PreTokenizer, false);
  json["model"]["byte_fallback"] = true;  // SentencePiece-style BPE
  write_tokenizer_dir(dir, json);
  auto tok = load_tokenizer(dir.path().string(), 32000);
  EXPECT_EQ(tok->encode("hi"), (Ids{104, 105}));
  EXPECT_EQ(tok->eos_id(), 257);

  json = small_tokenizer_json(kGpt2PreTokenizer, false);
  json["pre_tokenizer"] = {{"type", "Metaspace"}};
  write_tokenizer_dir(dir, json);
  EXPECT_EQ(load_tokenizer(dir.path().string(), 32000)->vocab_size(), 259);
}

TEST(LoadTokenizer, PresetAndDirectoryWithoutTokenizerUseBytes) {
  EXPECT_EQ(load_tokenizer("tiny-llama", 256)->eos_id(), 3);
  TempDir dir;
  EXPECT_EQ(load_tokenizer(dir.path().string(), 1000)->eos_id(), 257);
  expect_error_mentions<UsageError>([&] { load_tokenizer((dir.path() / "missing").string(), 256); },
                                    {"missing"});
}

TEST(LoadTokenizer, MalformedJsonNamesTheFile) {
  TempDir dir;
  write_file(dir / "tokenizer.json", "{\"model\": ");
  expect_error_mentions([&] { load_tokenizer(dir.path().string(), 256); },
                        {"tokenizer.json", "not valid JSON"});
}

}  // namespace
}  // namespace tessel::data
