// Collation and packing against tensors written out by hand.
#include "data/collate.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "data_test_util.h"

namespace tessel::data {
namespace {

using testing::expect_error_mentions;
using Ids = std::vector<int64_t>;

Dataset three_examples() {
  return Dataset("test",
                 {Example{{10, 11, 12}, {0, 1, 1}}, Example{{20, 21, 22, 23, 24}, {0, 0, 1, 1, 1}},
                  Example{{30, 31, 32, 33}, {1, 1, 1, 1}}});
}

at::Tensor rows(std::vector<Ids> values) {
  std::vector<at::Tensor> out;
  for (auto& row : values) out.push_back(at::tensor(row, at::kLong));
  return at::stack(out);
}

TEST(Collate, PadsToMultiple) {
  CollateOptions options;
  options.pad_id = 99;
  options.divisible_by = 4;
  Batch b = collate(three_examples(), {0, 1}, options);
  EXPECT_TRUE(at::equal(
      b.input_ids, rows({{10, 11, 12, 99, 99, 99, 99, 99}, {20, 21, 22, 23, 24, 99, 99, 99}})));
  EXPECT_TRUE(at::equal(b.loss_mask, rows({{0, 1, 1, 0, 0, 0, 0, 0}, {0, 0, 1, 1, 1, 0, 0, 0}})));
  EXPECT_TRUE(
      at::equal(b.attention_mask, rows({{1, 1, 1, 0, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 0, 0, 0}})));
  EXPECT_TRUE(
      at::equal(b.position_ids, rows({{0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3, 4, 5, 6, 7}})));
  EXPECT_TRUE(at::equal(b.document_ids,
                        rows({{0, 0, 0, -1, -1, -1, -1, -1}, {0, 0, 0, 0, 0, -1, -1, -1}})));
  EXPECT_EQ(b.num_targets, 5);
  EXPECT_EQ(b.num_tokens, 8);
  EXPECT_EQ(b.input_ids.scalar_type(), at::kLong);
}

TEST(Collate, FixedLength) {
  CollateOptions options;
  options.pad_to_length = 6;
  Batch b = collate(three_examples(), {2}, options);
  EXPECT_TRUE(at::equal(b.input_ids, rows({{30, 31, 32, 33, 0, 0}})));
  EXPECT_EQ(b.num_targets, 3);  // token 0 has no predecessor
  options.pad_to_length = 4;
  expect_error_mentions<UsageError>([&] { collate(three_examples(), {1}, options); },
                                    {"pad_to_length 4", "5"});
}

TEST(Pack, FirstFitDecreasingWithRestartingPositions) {
  // Lengths 3, 5, 4 into rows of 8: 5 opens row 0, 4 does not fit (9) and
  // opens row 1, 3 fills row 0. First token of every document is no target.
  CollateOptions options;
  options.pad_id = 0;
  Batch b = pack(three_examples(), {0, 1, 2}, 8, options);
  EXPECT_TRUE(at::equal(b.input_ids,
                        rows({{20, 21, 22, 23, 24, 10, 11, 12}, {30, 31, 32, 33, 0, 0, 0, 0}})));
  EXPECT_TRUE(at::equal(b.loss_mask, rows({{0, 0, 1, 1, 1, 0, 1, 1}, {0, 1, 1, 1, 0, 0, 0, 0}})));
  EXPECT_TRUE(
      at::equal(b.position_ids, rows({{0, 1, 2, 3, 4, 0, 1, 2}, {0, 1, 2, 3, 4, 5, 6, 7}})));
  EXPECT_TRUE(
      at::equal(b.document_ids, rows({{0, 0, 0, 0, 0, 1, 1, 1}, {0, 0, 0, 0, -1, -1, -1, -1}})));
  EXPECT_TRUE(
      at::equal(b.attention_mask, rows({{1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 0, 0, 0, 0}})));
  EXPECT_EQ(b.num_targets, 8);
  expect_error_mentions<UsageError>([] { pack(three_examples(), {1}, 4, CollateOptions{}); },
                                    {"5 tokens", "capacity 4"});
}

// Padded rows (one document, then padding) say no more than causal order;
// packed rows (a second document) and anything else do.
TEST(DocumentIds, PaddedRowsAreWholeRowsPackedOnesAreNot) {
  CollateOptions options;
  options.divisible_by = 4;
  EXPECT_TRUE(documents_are_whole_rows(collate(three_examples(), {0, 1}, options).document_ids));
  EXPECT_TRUE(documents_are_whole_rows(rows({{0, 0, 0}, {-1, -1, -1}})));
  EXPECT_TRUE(documents_are_whole_rows(at::Tensor()));
  EXPECT_FALSE(documents_are_whole_rows(pack(three_examples(), {0, 1, 2}, 8, options).document_ids));
  EXPECT_FALSE(documents_are_whole_rows(rows({{0, 0, 1, 1}})));
  EXPECT_FALSE(documents_are_whole_rows(rows({{0, -1, 0, 0}})));  // a document after padding
  EXPECT_FALSE(documents_are_whole_rows(rows({{-1, 0, 0, 0}})));
}

}  // namespace
}  // namespace tessel::data
