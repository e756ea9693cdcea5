#include "tensor/shard_spec.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"

namespace tessel::tensor {
namespace {

using Shape = std::vector<int64_t>;

ShardSpec tp_then_fsdp(Shape global, int64_t tp_dim) {
  return ShardSpec(std::move(global), {{"tp", Layout::shard(tp_dim)}, {"dp_shard_cp", Layout::shard(0)}});
}

MeshCoords coords(int tp_size, int tp_rank, int dp_size, int dp_rank) {
  return {{"tp", {tp_size, tp_rank}}, {"dp_shard_cp", {dp_size, dp_rank}}};
}

// [10, 6], tp=2 on dim 0 (5 rows each), then dp=3 on dim 0 of those 5 rows
// (2, 2, 1): hand-computed boxes.
TEST(ShardSpec, NestedRowsHandTable) {
  const ShardSpec spec = tp_then_fsdp({10, 6}, 0);
  struct Row { int tp, dp; Shape offset, shape; };
  const Row rows[] = {
      {0, 0, {0, 0}, {2, 6}}, {0, 1, {2, 0}, {2, 6}}, {0, 2, {4, 0}, {1, 6}},
      {1, 0, {5, 0}, {2, 6}}, {1, 1, {7, 0}, {2, 6}}, {1, 2, {9, 0}, {1, 6}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(testing::Message() << "tp " << row.tp << " dp " << row.dp);
    EXPECT_EQ(spec.local_offset(coords(2, row.tp, 3, row.dp)), row.offset);
    EXPECT_EQ(spec.local_shape(coords(2, row.tp, 3, row.dp)), row.shape);
  }
}

// Rowwise weight: TP on dim 1, FSDP on dim 0. [5, 7] over tp=4 (2,2,2,1 cols),
// dp=4 (2,2,1,0 rows): trailing dp ranks hold empty boxes.
TEST(ShardSpec, ColumnsThenRowsWithEmptyShards) {
  const ShardSpec spec = tp_then_fsdp({5, 7}, 1);
  EXPECT_EQ(spec.local_shape(coords(4, 3, 4, 0)), (Shape{2, 1}));
  EXPECT_EQ(spec.local_offset(coords(4, 3, 4, 0)), (Shape{0, 6}));
  EXPECT_EQ(spec.local_shape(coords(4, 1, 4, 2)), (Shape{1, 2}));
  EXPECT_EQ(spec.local_offset(coords(4, 1, 4, 2)), (Shape{4, 2}));
  const LocalBox empty = spec.local_box(coords(4, 0, 4, 3));
  EXPECT_EQ(empty.shape, (Shape{0, 2}));
  EXPECT_EQ(empty.offset, (Shape{5, 0}));
  EXPECT_EQ(empty.numel(), 0);
}

// torch.chunk of torch.chunk is the reference for every coordinate.
TEST(ShardSpec, LocalViewMatchesNestedTorchChunk) {
  for (int64_t tp_dim : {0, 1, -1}) {
    for (int tp = 1; tp <= 4; ++tp) {
      for (int dp = 1; dp <= 4; ++dp) {
        const Shape global{7, 5};
        const ShardSpec spec = tp_then_fsdp(global, tp_dim);
        const at::Tensor full = at::arange(35, at::kFloat).view({7, 5});
        for (int t = 0; t < tp; ++t) {
          for (int d = 0; d < dp; ++d) {
            SCOPED_TRACE(testing::Message() << "tp_dim " << tp_dim << " tp " << t << "/" << tp
                                            << " dp " << d << "/" << dp);
            const auto tp_chunks = full.chunk(tp, tp_dim);
            at::Tensor expected = t < static_cast<int>(tp_chunks.size())
                                      ? tp_chunks[static_cast<size_t>(t)]
                                      : full.narrow(tp_dim, 0, 0);
            if (expected.size(0) > 0) {
              const auto dp_chunks = expected.chunk(dp, 0);
              expected = d < static_cast<int>(dp_chunks.size()) ? dp_chunks[static_cast<size_t>(d)]
                                                                : expected.narrow(0, 0, 0);
            }
            const at::Tensor local = spec.local_view(full, coords(tp, t, dp, d));
            EXPECT_EQ(local.sizes().vec(), expected.sizes().vec());
            if (local.sizes() == expected.sizes()) {
              EXPECT_TRUE(at::equal(local, expected));
            }
          }
        }
      }
    }
  }
}

TEST(ShardSpec, ReplicateAndPartialKeepTheGlobalBox) {
  const ShardSpec spec({4, 3}, {{"dp_replicate", Layout::replicate()}, {"tp", Layout::partial()}});
  EXPECT_FALSE(spec.is_sharded());
  // No coordinates needed for placements that do not shard.
  EXPECT_EQ(spec.local_shape({}), (Shape{4, 3}));
  EXPECT_EQ(spec.local_offset({}), (Shape{0, 0}));
  EXPECT_TRUE(tp_then_fsdp({4, 3}, 0).is_sharded());
}

TEST(ShardSpec, NormalizesAndPrints) {
  const ShardSpec spec({8, 4}, {{"tp", Layout::shard(-1)}, {"dp_shard_cp", Layout::shard(0)}});
  EXPECT_EQ(spec.placements()[0].layout, Layout::shard(1));
  EXPECT_EQ(spec.to_string(), "[8, 4] tp:Shard(1) dp_shard_cp:Shard(0)");
  EXPECT_EQ(spec, ShardSpec({8, 4}, {{"tp", Layout::shard(1)}, {"dp_shard_cp", Layout::shard(0)}}));
}

TEST(ShardSpec, RejectsBadSpecsAndCoordinates) {
  EXPECT_THROW(ShardSpec({4}, {{"tp", Layout::shard(1)}}), Error);
  EXPECT_THROW(ShardSpec({4}, {{"tp", Layout::shard(0)}, {"tp", Layout::replicate()}}), Error);
  EXPECT_THROW(ShardSpec({-1}, {}), Error);
  const ShardSpec spec = tp_then_fsdp({4, 4}, 0);
  EXPECT_THROW(spec.local_shape({{"tp", {2, 2}}, {"dp_shard_cp", {1, 0}}}), Error);  // rank >= size
  try {
    spec.local_shape({{"tp", {2, 0}}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dp_shard_cp"), std::string::npos) << e.what();
  }
  EXPECT_THROW(spec.local_view(at::zeros({4, 5}), coords(1, 0, 1, 0)), Error);
}

}  // namespace
}  // namespace tessel::tensor
