// Sub-communicators from split: membership, ordering by key, names showing the
// world ranks, collectives confined to the group, nested splits, and
// counters and timeouts kept per communicator.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "dist/communicator.h"
#include "dist/mpi/values.h"

namespace tessel::dist {
namespace {

using testing::rank_values;

std::string ranks_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

TEST(MpiSplit, EvenOdd) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  CommunicatorPtr g = w->split(me % 2, me, "parity");
  std::vector<int> members;
  for (int r = me % 2; r < size; r += 2) members.push_back(r);
  EXPECT_EQ(g->size(), static_cast<int>(members.size()));
  EXPECT_EQ(g->rank(), me / 2);
  EXPECT_EQ(g->world_ranks(), members);
  EXPECT_EQ(g->name(), "parity (ranks " + ranks_list(members) + ")");
  // All-gather inside the group sees only the members, in group-rank order.
  at::Tensor in = rank_values(me, 5, at::kFloat);
  at::Tensor out = at::zeros({g->size() * 5});
  g->all_gather_into(out, in);
  std::vector<at::Tensor> parts;
  for (int r : members) parts.push_back(rank_values(r, 5, at::kFloat));
  EXPECT_TRUE(at::equal(out, at::cat(parts)));
  // Reduce-scatter inside the group, bf16.
  at::Tensor rs_in = rank_values(me, g->size() * 3, at::kBFloat16);
  at::Tensor rs_out = at::zeros({3}, at::kBFloat16);
  g->reduce_scatter_from(rs_out, rs_in);
  at::Tensor expected = at::zeros({3}, at::kLong);
  for (int r : members) expected += rank_values(r, 3, at::kLong, g->rank() * 3);
  EXPECT_TRUE(at::equal(rs_out, expected.to(at::kBFloat16)));
}

TEST(MpiSplit, KeyOrdersRanks) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  CommunicatorPtr rev = w->split(0, size - me, "reversed");
  EXPECT_EQ(rev->size(), size);
  EXPECT_EQ(rev->rank(), size - 1 - me);
  for (int r = 0; r < size; ++r) EXPECT_EQ(rev->world_ranks()[r], size - 1 - r);
  // Broadcast from group rank 0 = world rank size-1.
  at::Tensor t = rank_values(me, 4, at::kLong);
  rev->broadcast(t, 0);
  EXPECT_TRUE(at::equal(t, rank_values(size - 1, 4, at::kLong)));
}

TEST(MpiSplit, SingletonsAndNested) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  CommunicatorPtr alone = w->split(me, 0, "self");
  EXPECT_EQ(alone->size(), 1);
  EXPECT_EQ(alone->name(), "self (ranks " + std::to_string(me) + ")");
  at::Tensor t = rank_values(me, 6, at::kFloat);
  at::Tensor copy = t.clone();
  alone->all_reduce(t);
  EXPECT_TRUE(at::equal(t, copy));

  // Nested: first halves [0, size/2) and [size/2, size), then parity within.
  const int half = me < size / 2 ? 0 : 1;
  CommunicatorPtr h = w->split(half, me, "half");
  CommunicatorPtr hp = h->split(h->rank() % 2, h->rank(), "half_parity");
  std::vector<int> members;
  for (size_t i = h->rank() % 2; i < h->world_ranks().size(); i += 2) {
    members.push_back(h->world_ranks()[i]);
  }
  EXPECT_EQ(hp->world_ranks(), members);
  at::Tensor s = rank_values(me, 9, at::kLong);
  hp->all_reduce(s);
  at::Tensor expected = at::zeros({9}, at::kLong);
  for (int r : members) expected += rank_values(r, 9, at::kLong);
  EXPECT_TRUE(at::equal(s, expected));
}

TEST(MpiSplit, ManySplitsAreFreed) {
  // Communicators are freed when dropped; creating many must not exhaust MPI.
  CommunicatorPtr w = world();
  for (int i = 0; i < 200; ++i) {
    CommunicatorPtr g = w->split(w->rank() % 2, 0, "tmp");
    if (i % 50 == 0) g->barrier();
  }
  w->barrier();
}

TEST(MpiSplit, InheritsTimeoutAndCountsSeparately) {
  CommunicatorPtr w = world();
  const auto saved = w->timeout();
  w->set_timeout(std::chrono::seconds(77));
  CommunicatorPtr g = w->split(0, w->rank(), "all");
  w->set_timeout(saved);
  EXPECT_EQ(g->timeout(), std::chrono::seconds(77));
  w->reset_counters();
  at::Tensor t = at::ones({10});
  g->all_reduce(t);
  g->all_reduce(t);
  EXPECT_EQ(g->counters().count(CollectiveKind::AllReduce), 2);
  EXPECT_EQ(g->counters().bytes[static_cast<int>(CollectiveKind::AllReduce)], 80);
  EXPECT_EQ(w->counters().count(CollectiveKind::AllReduce), 0);
  EXPECT_TRUE(at::equal(t, at::full({10}, static_cast<float>(w->size() * w->size()))));
}

}  // namespace
}  // namespace tessel::dist
