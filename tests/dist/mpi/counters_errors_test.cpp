// Counters per kind (calls and bytes each rank sent), and argument errors
// under MPI: they throw on the calling rank before any communication, so the
// ranks stay in step and later collectives still work.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "dist/communicator.h"

namespace tessel::dist {
namespace {

int64_t bytes(const CollectiveCounters& c, CollectiveKind k) {
  return c.bytes[static_cast<int>(k)];
}

TEST(MpiCounters, CountCallsAndBytes) {
  CommunicatorPtr w = world();
  const int size = w->size();
  w->reset_counters();
  at::Tensor in = at::ones({10});
  at::Tensor out = at::zeros({10 * size});
  for (int i = 0; i < 3; ++i) w->all_gather_into(out, in);
  w->reduce_scatter_from(in, out);
  at::Tensor h = at::ones({4}, at::kHalf);
  w->all_reduce(h);
  at::Tensor a2a_in = at::ones({size * 2}, at::kLong), a2a_out = at::zeros({size * 2}, at::kLong);
  w->all_to_all(a2a_out, a2a_in);
  w->broadcast(in, 0);
  w->barrier();
  CollectiveCounters c = w->counters();
  EXPECT_EQ(c.count(CollectiveKind::AllGather), 3);
  EXPECT_EQ(bytes(c, CollectiveKind::AllGather), 3 * 40);
  EXPECT_EQ(c.count(CollectiveKind::ReduceScatter), 1);
  EXPECT_EQ(bytes(c, CollectiveKind::ReduceScatter), 40 * size);
  EXPECT_EQ(c.count(CollectiveKind::AllReduce), 1);
  EXPECT_EQ(bytes(c, CollectiveKind::AllReduce), 8);
  EXPECT_EQ(c.count(CollectiveKind::AllToAll), 1);
  EXPECT_EQ(bytes(c, CollectiveKind::AllToAll), 16 * size);
  EXPECT_EQ(c.count(CollectiveKind::Broadcast), 1);
  EXPECT_EQ(c.count(CollectiveKind::Barrier), 1);
  w->reset_counters();
  EXPECT_EQ(w->counters().count(CollectiveKind::AllGather), 0);
}

TEST(MpiErrors, BadArgumentsThrowAndRanksStayInStep) {
  CommunicatorPtr w = world();
  const int size = w->size();
  EXPECT_THROW(w->all_gather_into(at::zeros({size * 4 + 1}), at::zeros({4})), Error);
  EXPECT_THROW(w->reduce_scatter_from(at::zeros({4}), at::zeros({size * 4}, at::kHalf)), Error);
  EXPECT_THROW(w->all_reduce(at::zeros({4}, at::kBool)), Error);
  EXPECT_THROW(w->all_to_all(at::zeros({size + 1}), at::zeros({size + 1})), Error);
  EXPECT_THROW(w->broadcast(at::zeros({2}), size), Error);
  EXPECT_THROW(w->split(-1, 0, "bad"), Error);
  try {
    w->all_reduce(at::zeros({4, 4}).t());
    ADD_FAILURE() << "no error for a non-contiguous tensor";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce on group 'world'"), std::string::npos)
        << e.what();
  }
  at::Tensor t = at::ones({3});
  w->all_reduce(t);
  EXPECT_TRUE(at::equal(t, at::full({3}, static_cast<float>(size))));
}

}  // namespace
}  // namespace tessel::dist
