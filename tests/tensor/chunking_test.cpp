#include "tensor/chunking.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"

namespace tessel::tensor {
namespace {

using Sizes = std::vector<int64_t>;

TEST(Chunking, HandTable) {
  EXPECT_EQ(chunk_sizes(5, 4), (Sizes{2, 2, 1, 0}));
  EXPECT_EQ(chunk_sizes(2, 3), (Sizes{1, 1, 0}));
  EXPECT_EQ(chunk_sizes(7, 4), (Sizes{2, 2, 2, 1}));
  EXPECT_EQ(chunk_sizes(7, 3), (Sizes{3, 3, 1}));
  EXPECT_EQ(chunk_sizes(9, 4), (Sizes{3, 3, 3, 0}));
  EXPECT_EQ(chunk_sizes(2, 4), (Sizes{1, 1, 0, 0}));
  EXPECT_EQ(chunk_sizes(8, 4), (Sizes{2, 2, 2, 2}));
  EXPECT_EQ(chunk_sizes(0, 3), (Sizes{0, 0, 0}));
  EXPECT_EQ(chunk_sizes(5, 1), (Sizes{5}));
  EXPECT_EQ(max_chunk(5, 4), 2);
  EXPECT_EQ(max_chunk(0, 4), 0);
  EXPECT_EQ(chunk_offset(5, 4, 0), 0);
  EXPECT_EQ(chunk_offset(5, 4, 2), 4);
  EXPECT_EQ(chunk_offset(5, 4, 3), 5);  // empty trailing chunk starts at the end
  EXPECT_EQ(chunk_offset(2, 3, 2), 2);
  EXPECT_EQ(chunk_size(5, 4, 3), 0);
}

// torch.chunk is the reference: it returns only the non-empty chunks, the
// missing trailing ones are empty.
TEST(Chunking, MatchesTorchChunk) {
  for (int64_t n = 0; n <= 20; ++n) {
    for (int world = 1; world <= 8; ++world) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " world=" << world);
      Sizes expected(static_cast<size_t>(world), 0);
      Sizes expected_offsets(static_cast<size_t>(world), n);
      if (n > 0) {
        auto chunks = at::arange(n).chunk(world);
        for (size_t r = 0; r < chunks.size(); ++r) {
          expected[r] = chunks[r].numel();
          expected_offsets[r] = chunks[r][0].item<int64_t>();
        }
      }
      EXPECT_EQ(chunk_sizes(n, world), expected);
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(chunk_offset(n, world, r), expected_offsets[static_cast<size_t>(r)]) << "rank " << r;
        EXPECT_EQ(chunk_size(n, world, r), expected[static_cast<size_t>(r)]) << "rank " << r;
      }
    }
  }
}

TEST(Chunking, RejectsBadArguments) {
  EXPECT_THROW(chunk_sizes(-1, 2), Error);
  EXPECT_THROW(chunk_sizes(4, 0), Error);
  EXPECT_THROW(chunk_offset(4, 2, 2), Error);
  EXPECT_THROW(chunk_size(4, 2, -1), Error);
}

}  // namespace
}  // namespace tessel::tensor
