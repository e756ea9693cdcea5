// all_to_all_v against rows computed independently on every rank: each rank
// knows what every rank sends to every other (rows(r, j) below), so the
// expected output comes from that formula, not from the collective. Counts
// include zeros (a rank that sends a peer nothing, a rank that receives
// nothing at all), as expert parallelism produces when an expert gets no tokens.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "dist/communicator.h"

namespace tessel::dist {
namespace {

// Rows rank r sends to rank j; seed varies the pattern between sub-cases.
int64_t rows(int r, int j, int seed) { return (r * 3 + j * 2 + seed) % 4; }

// Element `col` of row i of the block r sends to j: exact in every dtype used.
int64_t value(int r, int j, int64_t i, int64_t col) { return r * 64 + j * 16 + i * 4 + col % 4; }

at::Tensor block(int r, int j, int seed, int64_t width, at::ScalarType dtype) {
  const int64_t n = rows(r, j, seed);
  at::Tensor t = at::empty({n, width}, at::kLong);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < width; ++c) t[i][c] = value(r, j, i, c);
  }
  return t.to(dtype);
}

TEST(MpiAllToAllV, RowsReachTheirRanksEveryDtypeWithZeroCounts) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16, at::kLong}) {
    for (int seed = 0; seed < 4; ++seed) {
      for (bool blocking : {true, false}) {
        const int64_t width = 3;
        std::vector<at::Tensor> sends, expected;
        std::vector<int64_t> in_counts, out_counts;
        for (int j = 0; j < size; ++j) {
          sends.push_back(block(me, j, seed, width, dtype));
          in_counts.push_back(rows(me, j, seed));
          expected.push_back(block(j, me, seed, width, dtype));
          out_counts.push_back(rows(j, me, seed));
        }
        at::Tensor in = at::cat(sends);
        at::Tensor out = at::full({at::cat(expected).size(0), width}, -1, in.options());
        if (blocking) {
          w->all_to_all_v(out, out_counts, in, in_counts);
        } else {
          w->all_to_all_v_async(out, out_counts, in, in_counts)->wait();
        }
        EXPECT_TRUE(at::equal(out, at::cat(expected)))
            << c10::toString(dtype) << " seed " << seed << (blocking ? " blocking" : " async");
      }
    }
  }
}

// Several in flight next to the count exchange that precedes them in expert
// parallelism; the counters count each call once and the bytes sent to peers
// (not to this rank itself).
TEST(MpiAllToAllV, CountsExchangedFirstThenSeveralInFlight) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  w->reset_counters();
  std::vector<int64_t> mine(static_cast<size_t>(size));
  for (int j = 0; j < size; ++j) mine[static_cast<size_t>(j)] = rows(me, j, 1);
  at::Tensor send_counts = at::tensor(mine, at::kLong);
  at::Tensor recv_counts = at::empty({size}, at::kLong);
  w->all_to_all(recv_counts, send_counts);
  std::vector<int64_t> out_counts(recv_counts.data_ptr<int64_t>(), recv_counts.data_ptr<int64_t>() + size);
  for (int j = 0; j < size; ++j) EXPECT_EQ(out_counts[static_cast<size_t>(j)], rows(j, me, 1));

  const int64_t width = 5;
  std::vector<at::Tensor> ins, outs;
  std::vector<WorkPtr> works;
  int64_t sent_to_peers = 0;
  for (int k = 0; k < 3; ++k) {
    std::vector<at::Tensor> sends;
    for (int j = 0; j < size; ++j) {
      sends.push_back(block(me, j, 1, width, at::kFloat) + k);
      if (j != me) sent_to_peers += rows(me, j, 1) * width * 4;
    }
    ins.push_back(at::cat(sends));
    int64_t total = 0;
    for (int64_t c : out_counts) total += c;
    outs.push_back(at::zeros({total, width}));
    works.push_back(w->all_to_all_v_async(outs.back(), out_counts, ins.back(), mine));
  }
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  for (int k = 0; k < 3; ++k) {
    std::vector<at::Tensor> expected;
    for (int j = 0; j < size; ++j) expected.push_back(block(j, me, 1, width, at::kFloat) + k);
    EXPECT_TRUE(at::equal(outs[static_cast<size_t>(k)], at::cat(expected))) << k;
  }
  const CollectiveCounters c = w->counters();
  EXPECT_EQ(c.count(CollectiveKind::AllToAll), 4);
  const int kind = static_cast<int>(CollectiveKind::AllToAll);
  // The count exchange sends 8 bytes to each peer.
  EXPECT_EQ(c.sent_same_node[kind] + c.sent_other_node[kind], sent_to_peers + 8 * (size - 1));
}

TEST(MpiAllToAllV, BadArgumentsThrowBeforeCommunicating) {
  CommunicatorPtr w = world();
  const int size = w->size();
  std::vector<int64_t> ones(static_cast<size_t>(size), 1);
  at::Tensor in = at::zeros({size, 2}), out = at::zeros({size, 2});
  std::vector<int64_t> short_counts(static_cast<size_t>(size - 1), 1);
  EXPECT_THROW(w->all_to_all_v(out, ones, in, short_counts), Error);
  std::vector<int64_t> negative = ones;
  negative[0] = -1;
  negative[1] = 2;
  EXPECT_THROW(w->all_to_all_v(out, ones, in, negative), Error);
  std::vector<int64_t> too_many = ones;
  too_many[0] = 2;
  EXPECT_THROW(w->all_to_all_v(out, too_many, in, ones), Error);
  EXPECT_THROW(w->all_to_all_v(at::zeros({size, 3}), ones, in, ones), Error);
  EXPECT_THROW(w->all_to_all_v(out.to(at::kDouble), ones, in, ones), Error);
  EXPECT_THROW(w->all_to_all_v(in, ones, in, ones), Error);
  try {
    w->all_to_all_v(out, ones, in, short_counts);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in_counts has " + std::to_string(size - 1) + " entries"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessel::dist
