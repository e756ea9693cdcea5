// The progress engine keeps many collectives in flight: a group whose peer is
// late does not hold up another group (the old single queue deadlocked here),
// a collective advances while the caller computes and never waits, and
// issue order within one communicator survives multi-step jobs interleaved
// with small ones and ranks that issue at different moments.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "dist/communicator.h"
#include "dist/mpi/values.h"

namespace tessel::dist {
namespace {

using testing::rank_values;
using testing::reduced_values;

// Short enough that a deadlock ends the test run with the timeout message
// naming the collective, long enough for an oversubscribed machine.
constexpr std::chrono::seconds kTimeout{60};

CommunicatorPtr group_over_world(const std::string& name) {
  CommunicatorPtr w = world();
  CommunicatorPtr g = w->split(0, w->rank(), name);
  g->set_timeout(kTimeout);
  return g;
}

TEST(ProgressEngine, LateGroupDoesNotHoldUpAnother) {
  // Rank 0 issues A before B; every other rank joins B first, and joins A
  // only after a third collective C that rank 0 enters once B completed and
  // A was seen unfinished. With one queue for all groups, rank 0's B would
  // wait behind A, which waits for the others, which wait for B: deadlock.
  CommunicatorPtr a = group_over_world("lane_a");
  CommunicatorPtr b = group_over_world("lane_b");
  CommunicatorPtr c = group_over_world("lane_c");
  const int size = a->size(), me = a->rank();
  const int64_t n = 4096;
  at::Tensor x = rank_values(me, n, at::kFloat, 0, 1);
  at::Tensor y = rank_values(me, n, at::kFloat, 0, 2);
  if (me == 0) {
    WorkPtr wa = a->all_reduce_async(x, ReduceOp::Sum);
    WorkPtr wb = b->all_reduce_async(y, ReduceOp::Sum);
    wb->wait();
    // A cannot have completed: the other ranks post it only after C.
    EXPECT_FALSE(wa->is_completed());
    c->barrier();
    wa->wait();
  } else {
    // The asynchronous form, as on rank 0 (communicator.h: same form on every rank).
    b->all_reduce_async(y, ReduceOp::Sum)->wait();
    c->barrier();
    a->all_reduce_async(x, ReduceOp::Sum)->wait();
  }
  EXPECT_TRUE(at::equal(x, reduced_values(size, n, at::kFloat, false, 0, 1)));
  EXPECT_TRUE(at::equal(y, reduced_values(size, n, at::kFloat, false, 0, 2)));
}

TEST(ProgressEngine, CollectiveAdvancesWhileCallerComputes) {
  // A multi-block reduction (32 MiB: several 16 MiB-scratch blocks) finishes
  // while this thread only computes and polls is_completed(), never waits.
  CommunicatorPtr w = group_over_world("compute_overlap");
  const int size = w->size(), me = w->rank();
  const int64_t n = int64_t{8} << 20;
  at::Tensor t = rank_values(me, n, at::kFloat, 0, 3);
  at::Tensor m = at::randn({128, 128});
  WorkPtr work = w->all_reduce_async(t, ReduceOp::Sum);
  int64_t computed_while_in_flight = 0;
  // The wall-clock bound only ends a broken run (liveness); it asserts no speed.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!work->is_completed() && std::chrono::steady_clock::now() < give_up) {
    m = at::tanh(at::mm(m, m));
    ++computed_while_in_flight;
  }
  EXPECT_TRUE(work->is_completed()) << "the all-reduce did not advance without wait()";
  EXPECT_GT(computed_while_in_flight, 0);
  work->wait();
  EXPECT_TRUE(at::equal(t, reduced_values(size, n, at::kFloat, false, 0, 3)));
}

TEST(ProgressEngine, IssueOrderKeptWithinACommunicator) {
  // Multi-block reduce-scatters and all-reduces interleaved with small
  // all-gathers and broadcasts on one communicator; odd ranks issue each one
  // a little later than even ranks, so the engine sees them at different
  // moments on different ranks. Every result must be right.
  CommunicatorPtr g = group_over_world("issue_order");
  const int size = g->size(), me = g->rank();
  const int64_t big = int64_t{3} << 19;  // per-rank chunk: several scratch blocks at 2-4 ranks
  const int64_t small = 777;
  std::vector<at::Tensor> rs_in, rs_out, ar, ag_in, ag_out, bc;
  std::vector<WorkPtr> works;
  for (int k = 0; k < 3; ++k) {
    if (me % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    rs_in.push_back(rank_values(me, size * big, at::kFloat, 0, k));
    rs_out.push_back(at::zeros({big}));
    works.push_back(g->reduce_scatter_from_async(rs_out.back(), rs_in.back(), ReduceOp::Sum));
    ag_in.push_back(rank_values(me, small, at::kBFloat16, 0, k));
    ag_out.push_back(at::zeros({size * small}, at::kBFloat16));
    works.push_back(g->all_gather_into_async(ag_out.back(), ag_in.back()));
    ar.push_back(rank_values(me, big, at::kHalf, 0, k));
    works.push_back(g->all_reduce_async(ar.back(), ReduceOp::Max));
    bc.push_back(rank_values(me, small, at::kLong, 0, k));
    works.push_back(g->broadcast_async(bc.back(), k % size));
  }
  for (auto& work : works) work->wait();
  for (int k = 0; k < 3; ++k) {
    EXPECT_TRUE(at::equal(rs_out[k], reduced_values(size, big, at::kFloat, false, me * big, k)))
        << k;
    std::vector<at::Tensor> parts;
    for (int r = 0; r < size; ++r) parts.push_back(rank_values(r, small, at::kBFloat16, 0, k));
    EXPECT_TRUE(at::equal(ag_out[k], at::cat(parts))) << k;
    EXPECT_TRUE(at::equal(ar[k], reduced_values(size, big, at::kHalf, true, 0, k))) << k;
    EXPECT_TRUE(at::equal(bc[k], rank_values(k % size, small, at::kLong, 0, k))) << k;
  }
}

TEST(ProgressEngine, DisjointGroupsRunTogether) {
  // Pairs of ranks each run their own sequence of all-reduces while a
  // world-wide one is in flight, issued first on every rank and finished last.
  CommunicatorPtr w = group_over_world("world_copy");
  const int size = w->size(), me = w->rank();
  CommunicatorPtr pair = w->split(me / 2, me, "pair");
  pair->set_timeout(kTimeout);
  at::Tensor whole = rank_values(me, 100000, at::kFloat, 0, 5);
  WorkPtr world_work = w->all_reduce_async(whole, ReduceOp::Sum);
  std::vector<at::Tensor> mine;
  for (int k = 0; k < 5; ++k) {
    mine.push_back(rank_values(me, 5000, at::kFloat, 0, 10 + k));
    pair->all_reduce(mine.back());
  }
  world_work->wait();
  EXPECT_TRUE(at::equal(whole, reduced_values(size, 100000, at::kFloat, false, 0, 5)));
  for (int k = 0; k < 5; ++k) {
    at::Tensor expected = at::zeros({5000}, at::kLong);
    for (int r = (me / 2) * 2; r < std::min(size, (me / 2) * 2 + 2); ++r) {
      expected += rank_values(r, 5000, at::kLong, 0, 10 + k);
    }
    EXPECT_TRUE(at::equal(mine[k], expected.to(at::kFloat))) << k;
  }
}

}  // namespace
}  // namespace tessel::dist
