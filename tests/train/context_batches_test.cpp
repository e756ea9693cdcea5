// Cutting micro batches for context parallelism (train/context_batches.h):
// rows padded to a multiple of 2·cp with tokens the loss ignores, each rank's
// load-balanced chunks of ids, labels, global positions and documents,
// written out by hand.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "loss/cross_entropy.h"
#include "train/context_batches.h"

namespace tessel::train {
namespace {

constexpr int64_t I = loss::kIgnoreIndex;

at::Tensor row(std::initializer_list<int64_t> v) { return at::tensor(std::vector<int64_t>(v), at::kLong).view({1, -1}); }

TEST(ContextBatches, RowsArePaddedAndCutIntoLoadBalancedChunks) {
  MicroBatch b;
  b.input_ids = row({10, 11, 12, 13, 14, 15, 16, 17, 18, 19});  // 10 tokens: cp 2 pads to 12
  b.labels = row({I, I, 12, 13, 14, 15, 16, 17, 18, I});
  b.num_tokens = 10;
  const MicroBatch r0 = context_parallel_slice(b, 2, 0);  // chunks 0 and 3 of 4 (3 tokens each)
  const MicroBatch r1 = context_parallel_slice(b, 2, 1);  // chunks 1 and 2
  EXPECT_TRUE(at::equal(r0.input_ids, row({10, 11, 12, 19, 0, 0})));
  EXPECT_TRUE(at::equal(r0.labels, row({I, I, 12, I, I, I})));
  EXPECT_TRUE(at::equal(r0.position_ids, at::tensor({0, 1, 2, 9, 10, 11}, at::kLong)));
  EXPECT_TRUE(at::equal(r1.input_ids, row({13, 14, 15, 16, 17, 18})));
  EXPECT_TRUE(at::equal(r1.labels, row({13, 14, 15, 16, 17, 18})));
  EXPECT_TRUE(at::equal(r1.position_ids, at::tensor({3, 4, 5, 6, 7, 8}, at::kLong)));
  EXPECT_FALSE(r0.document_ids.defined());
  EXPECT_EQ(r0.num_tokens, 10);  // the whole rows' count: train_step counts before cutting
}

TEST(ContextBatches, PackedRowsCarryPositionsAndDocuments) {
  MicroBatch b;
  b.input_ids = row({1, 2, 3, 4, 5, 6});
  b.labels = row({2, 3, I, 5, 6, I});
  b.position_ids = row({0, 1, 2, 0, 1, 2});
  b.document_ids = row({0, 0, 0, 1, 1, 1});
  const MicroBatch r1 = context_parallel_slice(b, 4, 1);  // 8 slots, chunks 1 and 6 of 8
  EXPECT_TRUE(at::equal(r1.input_ids, row({2, 0})));
  EXPECT_TRUE(at::equal(r1.labels, row({3, I})));
  EXPECT_TRUE(at::equal(r1.position_ids, row({1, 0})));
  EXPECT_TRUE(at::equal(r1.document_ids, row({0, -1})));  // padding is a document of its own
}

TEST(ContextBatches, OneRankKeepsTheBatchAsItIs) {
  MicroBatch b;
  b.input_ids = row({1, 2, 3});
  b.labels = row({2, 3, I});
  const MicroBatch same = context_parallel_slice(b, 1, 0);
  EXPECT_TRUE(same.input_ids.is_same(b.input_ids));
  EXPECT_FALSE(same.position_ids.defined());
}

}  // namespace
}  // namespace tessel::train
