// JSONL datasets with the byte tokenizer: expected ids are ASCII codes
// written out by hand (bos 256, eos 257 for vocab >= 259).
#include "data/dataset.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "data/byte_tokenizer.h"
#include "data/rng.h"
#include "data/synthetic.h"
#include "data_test_util.h"

namespace tessel::data {
namespace {

using testing::expect_error_mentions;
using testing::TempDir;
using testing::write_file;
using Ids = std::vector<int64_t>;

DatasetOptions options_with(bool add_bos, bool add_eos, int64_t max_length = 0) {
  DatasetOptions options;
  options.sequence.add_bos = add_bos;
  options.sequence.add_eos = add_eos;
  options.sequence.max_input_seq_length = max_length;
  options.vocab_size = 300;
  return options;
}

TEST(JsonlDataset, PromptResponse) {
  TempDir dir;
  write_file(dir / "d.jsonl",
             "{\"input\": \"ab\", \"output\": \"c\"}\n\n{\"output\": \"yz\", \"input\": \"\"}\n");
  ByteTokenizer tok(300);
  Dataset ds = load_dataset(dir / "d.jsonl", &tok, options_with(true, true));
  ASSERT_EQ(ds.size(), 2);
  EXPECT_EQ(ds[0].tokens, (Ids{256, 97, 98, 99, 257}));
  EXPECT_EQ(ds[0].loss_mask, (Ids{0, 0, 0, 1, 1}));
  EXPECT_EQ(ds[1].tokens, (Ids{256, 121, 122, 257}));
  EXPECT_EQ(ds[1].loss_mask, (Ids{0, 1, 1, 1}));

  Dataset plain = load_dataset(dir / "d.jsonl", &tok, options_with(false, false));
  EXPECT_EQ(plain[0].tokens, (Ids{97, 98, 99}));
  EXPECT_EQ(plain[0].loss_mask, (Ids{0, 0, 1}));

  ByteTokenizer small(256);  // bos = STX (2), eos = ETX (3)
  EXPECT_EQ(load_dataset(dir / "d.jsonl", &small, options_with(true, true))[0].tokens,
            (Ids{2, 97, 98, 99, 3}));
}

TEST(JsonlDataset, ChatTemplateMasksAllButAssistant) {
  TempDir dir;
  write_file(
      dir / "chat.jsonl",
      R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})");
  ByteTokenizer tok(300);
  Dataset ds = load_dataset(dir / "chat.jsonl", &tok, options_with(true, true));
  ASSERT_EQ(ds.size(), 1);
  const Ids system_header = {60, 124, 115, 121, 115, 116, 101, 109, 124, 62, 10};  // "<|system|>\n"
  const Ids user_header = {60, 124, 117, 115, 101, 114, 124, 62, 10};              // "<|user|>\n"
  const Ids assistant_header = {60,  124, 97,  115, 115, 105, 115,
                                116, 97,  110, 116, 124, 62,  10};  // "<|assistant|>\n"
  Ids tokens = {256};
  Ids mask = {0};
  auto add = [&](const Ids& ids, int64_t m) {
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    mask.insert(mask.end(), ids.size(), m);
  };
  add(system_header, 0);
  add({115, 10}, 0);  // "s\n"
  add(user_header, 0);
  add({104, 105, 10}, 0);  // "hi\n"
  add(assistant_header, 0);
  add({121, 111, 257}, 1);  // "yo" eos
  EXPECT_EQ(ds[0].tokens, tokens);
  EXPECT_EQ(ds[0].loss_mask, mask);
}

TEST(JsonlDataset, PreTokenisedLines) {
  TempDir dir;
  write_file(dir / "t.jsonl",
             "{\"tokens\": [5, 6, 7], \"loss_mask\": [0, 1, 1]}\n{\"tokens\": [1, 2]}\n");
  Dataset ds = load_dataset(dir / "t.jsonl", nullptr, options_with(true, true));
  ASSERT_EQ(ds.size(), 2);
  EXPECT_EQ(ds[0].tokens, (Ids{5, 6, 7}));  // no bos/eos added to token lines
  EXPECT_EQ(ds[0].loss_mask, (Ids{0, 1, 1}));
  EXPECT_EQ(ds[1].loss_mask, (Ids{1, 1}));
}

TEST(JsonlDataset, TruncationKeepsThePrefixAndDropsTargetlessExamples) {
  TempDir dir;
  write_file(
      dir / "d.jsonl",
      "{\"input\": \"ab\", \"output\": \"cd\"}\n{\"input\": \"abcdef\", \"output\": \"g\"}\n");
  ByteTokenizer tok(300);
  Dataset ds = load_dataset(dir / "d.jsonl", &tok, options_with(true, true, 4));
  ASSERT_EQ(ds.size(), 1);  // the second keeps bos+"abc": no target left
  EXPECT_EQ(ds[0].tokens, (Ids{256, 97, 98, 99}));
  EXPECT_EQ(ds[0].loss_mask, (Ids{0, 0, 0, 1}));
  expect_error_mentions<UsageError>(
      [&] { load_dataset(dir / "d.jsonl", &tok, options_with(true, true, 3)); },
      {"d.jsonl", "max_input_seq_length=3"});
}

TEST(JsonlDataset, ErrorsNameFileAndLine) {
  TempDir dir;
  ByteTokenizer tok(300);
  const auto opts = options_with(true, true);
  const std::string good = "{\"input\": \"a\", \"output\": \"b\"}\n";

  write_file(dir / "bad.jsonl", good + "\n{\"input\": \"x\"\n");
  expect_error_mentions<UsageError>([&] { load_dataset(dir / "bad.jsonl", &tok, opts); },
                                    {"bad.jsonl:3", "not valid JSON"});

  write_file(dir / "missing.jsonl", good + "{\"input\": \"x\"}\n");
  expect_error_mentions<UsageError>([&] { load_dataset(dir / "missing.jsonl", &tok, opts); },
                                    {"missing.jsonl:2", "'output' is missing"});

  write_file(dir / "type.jsonl", "{\"input\": 3, \"output\": \"b\"}\n");
  expect_error_mentions<UsageError>([&] { load_dataset(dir / "type.jsonl", &tok, opts); },
                                    {"type.jsonl:1", "'input'", "number"});

  write_file(dir / "keys.jsonl", "{\"prompt\": \"x\", \"completion\": \"y\"}\n");
  expect_error_mentions<UsageError>([&] { load_dataset(dir / "keys.jsonl", &tok, opts); },
                                    {"keys.jsonl:1", "prompt", "completion", "'messages'"});

  write_file(dir / "role.jsonl",
             good + good + R"({"messages": [{"role": "bot", "content": "x"}]})");
  expect_error_mentions<UsageError>([&] { load_dataset(dir / "role.jsonl", &tok, opts); },
                                    {"role.jsonl:3", "'bot'"});

  write_file(dir / "range.jsonl", "{\"tokens\": [1, 300]}\n");
  expect_error_mentions<UsageError>([&] { load_dataset(dir / "range.jsonl", &tok, opts); },
                                    {"range.jsonl:1", "tokens[1] = 300", "[0, 300)"});

  write_file(dir / "empty.jsonl", "\n  \n");
  expect_error_mentions<UsageError>([&] { load_dataset(dir / "empty.jsonl", &tok, opts); },
                                    {"empty.jsonl", "empty"});

  expect_error_mentions<UsageError>([&] { load_dataset(dir / "nope.jsonl", &tok, opts); },
                                    {"nope.jsonl", "synthetic"});
}

TEST(SplitMix64, PublishedReferenceValues) {
  // Reference outputs of SplitMix64 seeded with 0 (Vigna's splitmix64.c).
  SplitMix64 rng(0);
  EXPECT_EQ(rng.next(), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(rng.next(), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(rng.next(), 0x06C45D188009454FULL);
}

TEST(SyntheticDataset, DeterministicPerSeedAndSplit) {
  Dataset a = make_synthetic_dataset(7, "train", 10, 16, 50);
  Dataset b = make_synthetic_dataset(7, "train", 5, 16, 50);
  Dataset other_seed = make_synthetic_dataset(8, "train", 10, 16, 50);
  Dataset val = make_synthetic_dataset(7, "validation", 10, 16, 50);
  ASSERT_EQ(a.size(), 10);
  std::set<int64_t> seen;
  for (int64_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), 16);
    EXPECT_EQ(a[i].loss_mask, Ids(16, 1));
    for (int64_t t : a[i].tokens) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, 50);
      seen.insert(t);
    }
    if (i < b.size()) {
      EXPECT_EQ(a[i].tokens, b[i].tokens);  // independent of the count
    }
    EXPECT_NE(a[i].tokens, other_seed[i].tokens);
    EXPECT_NE(a[i].tokens, val[i].tokens);
  }
  EXPECT_GT(seen.size(), 40u);  // 160 draws over 50 ids cover most of them
  EXPECT_EQ(make_synthetic_dataset(7, "train", 10, 16, 50)[3].tokens, a[3].tokens);
}

TEST(SyntheticDataset, ByNameUsesMaxLength) {
  DatasetOptions options = options_with(true, true, 12);
  options.synthetic_num_examples = 3;
  Dataset ds = load_dataset("synthetic", nullptr, options);
  EXPECT_EQ(ds.size(), 3);
  EXPECT_EQ(ds[2].size(), 12);
  options.sequence.max_input_seq_length = 0;
  expect_error_mentions<UsageError>([&] { load_dataset("synthetic", nullptr, options); },
                                    {"max_input_seq_length"});
}

TEST(DemoDataset, ShippedFileLoads) {
  // ctest sets TESSEL_SOURCE_DIR; run by hand, the binary's directory is searched upwards.
  ByteTokenizer tok(256);
  DatasetOptions options = options_with(true, true, 64);
  Dataset train = load_dataset("demo_sft", &tok, options);
  options.split = "validation";
  Dataset val = load_dataset("demo_sft", &tok, options);
  EXPECT_GE(train.size(), 200);
  EXPECT_GE(val.size(), 32);
  for (const Example& e : train.examples()) {
    EXPECT_EQ(e.tokens.front(), 2);  // bos
    EXPECT_EQ(e.tokens.back(), 3);   // eos
    EXPECT_GT(e.num_targets(), 0);
  }
}

}  // namespace
}  // namespace tessel::data
