// Every collective and dtype of the world communicator against single-process
// math computed independently on each rank (values.h), for sizes that do and
// do not divide the group, empty tensors, and both reduction algorithms.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "dist/algorithms.h"
#include "dist/communicator.h"
#include "dist/mpi/values.h"

namespace tessel::dist {
namespace {

using testing::rank_values;
using testing::reduced_values;

const at::ScalarType kReducible[] = {at::kFloat, at::kBFloat16, at::kHalf, at::kLong};
const at::ScalarType kMovable[] = {at::kFloat, at::kBFloat16, at::kHalf, at::kLong,
                                   at::kDouble, at::kChar,     at::kBool, at::kInt};

// Restores the process-wide algorithm choice (every rank runs the same loop).
class Algos {
 public:
  Algos() : saved_(algorithms()) {}
  ~Algos() { set_algorithms(saved_); }

 private:
  Algorithms saved_;
};

std::string where(at::ScalarType dtype, int64_t n) {
  return std::string(c10::toString(dtype)) + " n=" + std::to_string(n);
}

TEST(MpiCollectives, WorldIdentity) {
  CommunicatorPtr w = world();
  ASSERT_GT(w->size(), 1) << "run under mpirun with at least 2 ranks";
  EXPECT_EQ(w->name(), "world");
  ASSERT_EQ(static_cast<int>(w->world_ranks().size()), w->size());
  for (int r = 0; r < w->size(); ++r) EXPECT_EQ(w->world_ranks()[r], r);
  const char* env = std::getenv("OMPI_COMM_WORLD_RANK");
  if (env) {
    EXPECT_EQ(w->rank(), std::atoi(env));
  }
}

TEST(MpiCollectives, AllGatherEveryDtype) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  for (at::ScalarType dtype : kMovable) {
    for (int64_t n : {0, 1, 5, 1000}) {
      at::Tensor in = rank_values(me, n, dtype);
      at::Tensor out = at::full({size * n}, 99, in.options());
      w->all_gather_into(out, in);
      std::vector<at::Tensor> parts;
      for (int r = 0; r < size; ++r) parts.push_back(rank_values(r, n, dtype));
      EXPECT_TRUE(at::equal(out, at::cat(parts))) << where(dtype, n);
    }
  }
}

TEST(MpiCollectives, AllGatherInOrderPiecesEqualTheAllGather) {
  // Pieces that divide the part, that do not, one element, more than the
  // part; windows of one piece and of several; in place and not; several
  // gathers issued back to back before any is awaited (the FSDP split's
  // use), with a plain collective of the same group in between.
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  const int64_t gathers_before = w->counters().count(CollectiveKind::AllGather);
  int64_t gathers = 0;
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kDouble, at::kLong}) {
    for (int64_t piece_bytes : {1, 12, 256, 1 << 20}) {
      for (int window : {1, 3}) {
        std::vector<at::Tensor> outs, expected;
        std::vector<WorkPtr> works;
        for (int64_t n : {0, 1, 5, 1000, 4099}) {
          if (n > 1000 && piece_bytes < 256) continue;  // thousands of one-element messages add nothing
          const bool in_place = n % 2 == 1;
          at::Tensor out = at::full({size * n}, 99, rank_values(me, 1, dtype).options());
          at::Tensor in = rank_values(me, n, dtype);
          if (in_place) {
            out.narrow(0, me * n, n).copy_(in);
            in = out.narrow(0, me * n, n);
          }
          works.push_back(w->all_gather_into_in_order_async(out, in, piece_bytes, window));
          ++gathers;
          std::vector<at::Tensor> parts;
          for (int r = 0; r < size; ++r) parts.push_back(rank_values(r, n, dtype));
          outs.push_back(out);
          expected.push_back(at::cat(parts));
          if (n == 5) {
            at::Tensor between = rank_values(me, 3, at::kFloat);
            at::Tensor gathered = at::zeros({size * 3});
            w->all_gather_into(gathered, between);
            ++gathers;
            EXPECT_TRUE(at::equal(gathered.narrow(0, me * 3, 3), between));
          }
        }
        for (size_t i = 0; i < works.size(); ++i) {
          works[i]->wait();
          EXPECT_TRUE(at::equal(outs[i], expected[i]))
              << where(dtype, outs[i].numel() / size) << " piece " << piece_bytes << " B, window " << window;
        }
      }
    }
  }
  // Counted as one all-gather per call, whatever the pieces.
  EXPECT_EQ(w->counters().count(CollectiveKind::AllGather) - gathers_before, gathers);
  EXPECT_THROW(w->all_gather_into_in_order_async(at::zeros({size * 4}), at::zeros({4}), 0, 2), Error);
}

TEST(MpiCollectives, AllGatherSegmentsLandInTheirOwnRegions) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  const std::vector<std::vector<int64_t>> cases = {{}, {3}, {2, 0, 5, 1}, {0, 0}, {1000, 7, 0, 4096}};
  const int64_t gathers_before = w->counters().count(CollectiveKind::AllGather);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
    for (const auto& segments : cases) {
      int64_t total = 0;
      for (int64_t n : segments) total += n;
      at::Tensor in = rank_values(me, total, dtype);
      at::Tensor out = at::full({size * total}, 99, in.options());
      w->all_gather_segments_async(out, in, segments)->wait();
      // Expected: segment by segment, every rank's slice of it in rank order.
      std::vector<at::Tensor> parts;
      int64_t offset = 0;
      for (int64_t n : segments) {
        for (int r = 0; r < size; ++r) parts.push_back(rank_values(r, total, dtype).narrow(0, offset, n));
        offset += n;
      }
      const at::Tensor expected = parts.empty() ? at::empty({0}, in.options()) : at::cat(parts);
      EXPECT_TRUE(at::equal(out, expected)) << where(dtype, total) << " segments " << segments.size();
    }
  }
  // One collective per call, however many segments.
  EXPECT_EQ(w->counters().count(CollectiveKind::AllGather) - gathers_before, 3 * static_cast<int64_t>(cases.size()));
  // Segments that do not tile `in` are refused on the calling rank before anything moves.
  EXPECT_THROW(w->all_gather_segments_async(at::zeros({size * 4}), at::zeros({4}), {1, 2}), Error);
}

TEST(MpiCollectives, AllGatherInPlaceAndMultiDim) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  const int64_t n = 6;
  at::Tensor out = at::zeros({size, 2, 3});
  out[me].copy_(rank_values(me, n, at::kFloat).view({2, 3}));
  w->all_gather_into(out, out[me]);
  for (int r = 0; r < size; ++r) {
    EXPECT_TRUE(at::equal(out[r].reshape(-1), rank_values(r, n, at::kFloat))) << "rank " << r;
  }
}

TEST(MpiCollectives, ReduceScatterEveryDtypeOpAndAlgorithm) {
  Algos restore;
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  for (auto algo : {ReduceScatterAlgorithm::AllToAllReduce, ReduceScatterAlgorithm::Native,
                    ReduceScatterAlgorithm::Auto}) {
    set_algorithms({AllReduceAlgorithm::Auto, algo});
    for (at::ScalarType dtype : kReducible) {
      for (bool max : {false, true}) {
        for (int64_t n : {0, 1, 7, 4096}) {
          at::Tensor in = rank_values(me, size * n, dtype);
          at::Tensor out = at::full({n}, 99, in.options());
          w->reduce_scatter_from(out, in, max ? ReduceOp::Max : ReduceOp::Sum);
          EXPECT_TRUE(at::equal(out, reduced_values(size, n, dtype, max, me * n)))
              << where(dtype, n) << (max ? " max " : " sum ") << to_string(algo);
        }
      }
    }
  }
}

TEST(MpiCollectives, ReduceScatterInPlace) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  const int64_t n = 33;
  at::Tensor buffer = rank_values(me, size * n, at::kFloat);
  w->reduce_scatter_from(buffer.narrow(0, me * n, n), buffer, ReduceOp::Sum);
  EXPECT_TRUE(at::equal(buffer.narrow(0, me * n, n),
                        reduced_values(size, n, at::kFloat, false, me * n)));
}

TEST(MpiCollectives, AllReduceEveryDtypeOpAndAlgorithm) {
  Algos restore;
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  for (auto algo : {AllReduceAlgorithm::ReduceScatterAllGather, AllReduceAlgorithm::Native,
                    AllReduceAlgorithm::Auto}) {
    set_algorithms({algo, ReduceScatterAlgorithm::Auto});
    for (at::ScalarType dtype : kReducible) {
      for (bool max : {false, true}) {
        // Sizes below, at and not multiples of the group size (uneven chunks,
        // ranks owning nothing).
        for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{size - 1}, int64_t{size + 1},
                          int64_t{1000}, int64_t{10007}}) {
          at::Tensor t = rank_values(me, n, dtype, 0, n);
          w->all_reduce(t, max ? ReduceOp::Max : ReduceOp::Sum);
          EXPECT_TRUE(at::equal(t, reduced_values(size, n, dtype, max, 0, n)))
              << where(dtype, n) << (max ? " max " : " sum ") << to_string(algo);
        }
      }
    }
  }
}

TEST(MpiCollectives, AllReduceOtherReducibleDtypesAndShapes) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  for (at::ScalarType dtype : {at::kDouble, at::kInt}) {
    at::Tensor t = rank_values(me, 24, dtype).view({2, 3, 4});
    w->all_reduce(t);
    EXPECT_TRUE(at::equal(t.view(-1), reduced_values(size, 24, dtype, false)));
  }
}

TEST(MpiCollectives, LargeAllReduceGrowsScratch) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  const int64_t n = (int64_t{1} << 20) + 3;
  for (at::ScalarType dtype : {at::kBFloat16, at::kFloat}) {
    at::Tensor t = rank_values(me, n, dtype);
    w->all_reduce(t);
    EXPECT_TRUE(at::equal(t, reduced_values(size, n, dtype, false))) << c10::toString(dtype);
  }
}

// The local-math reductions move their data through a bounded scratch, block
// after block (16 MiB, two blocks in flight): chunks of 5M elements take
// several blocks, the last one partial, at every group size (float32: 2M
// elements a block at 2 ranks, bfloat16 4M); each rank's own chunk is read
// where it lies, in place or not.
TEST(MpiCollectives, ReductionsLongerThanTheScratchTakeSeveralBlocks) {
  Algos restore;
  set_algorithms({AllReduceAlgorithm::ReduceScatterAllGather, ReduceScatterAlgorithm::AllToAllReduce});
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  const int64_t n = 4'200'003;
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    for (bool max : {false, true}) {
      if (max && dtype != at::kFloat) continue;  // the same blocks as the sum
      const ReduceOp op = max ? ReduceOp::Max : ReduceOp::Sum;
      const at::Tensor expected = reduced_values(size, n, dtype, max, me * n);
      at::Tensor in = rank_values(me, size * n, dtype);
      at::Tensor out = at::empty({n}, in.options());
      w->reduce_scatter_from(out, in, op);
      EXPECT_TRUE(at::equal(out, expected)) << where(dtype, n) << (max ? " max" : " sum");
      w->reduce_scatter_from(in.narrow(0, me * n, n), in, op);
      EXPECT_TRUE(at::equal(in.narrow(0, me * n, n), expected)) << where(dtype, n) << " in place";
      at::Tensor all = rank_values(me, size * n + 1, dtype);
      w->all_reduce(all, op);
      EXPECT_TRUE(at::equal(all, reduced_values(size, size * n + 1, dtype, max)))
          << where(dtype, size * n + 1) << (max ? " max" : " sum") << " all-reduce";
    }
  }
}

TEST(MpiCollectives, AllToAllEveryDtype) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  for (at::ScalarType dtype : kMovable) {
    for (int64_t c : {0, 1, 9}) {
      at::Tensor in = rank_values(me, size * c, dtype);
      at::Tensor out = at::full({size * c}, 99, in.options());
      w->all_to_all(out, in);
      std::vector<at::Tensor> parts;
      for (int r = 0; r < size; ++r) parts.push_back(rank_values(r, c, dtype, me * c));
      EXPECT_TRUE(at::equal(out, at::cat(parts))) << where(dtype, c);
    }
  }
}

TEST(MpiCollectives, BroadcastFromEveryRoot) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  for (at::ScalarType dtype : kMovable) {
    for (int root = 0; root < size; ++root) {
      at::Tensor t = rank_values(me, 17, dtype);
      w->broadcast(t, root);
      EXPECT_TRUE(at::equal(t, rank_values(root, 17, dtype))) << where(dtype, 17) << " root " << root;
    }
  }
  at::Tensor empty = at::empty({0});
  w->broadcast(empty, size - 1);
}

TEST(MpiCollectives, BarrierOrdersSideEffects) {
  // Every rank creates its marker file before the barrier; after it, all
  // markers must exist on every rank.
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  at::Tensor token = at::full({1}, static_cast<int64_t>(getpid()), at::kLong);
  w->broadcast(token, 0);
  auto marker = [&](int r) {
    return std::filesystem::temp_directory_path() /
           ("tessel_barrier_" + std::to_string(token.item<int64_t>()) + "_" + std::to_string(r));
  };
  std::ofstream(marker(me)) << me;
  w->barrier();
  for (int r = 0; r < size; ++r) EXPECT_TRUE(std::filesystem::exists(marker(r))) << "rank " << r;
  w->barrier();
  std::filesystem::remove(marker(me));
}

}  // namespace
}  // namespace tessel::dist
