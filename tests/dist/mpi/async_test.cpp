// Asynchronous collectives: several in flight at once, on the world and on a
// sub-communicator, waited in any order, all correct; the caller's thread
// computes meanwhile.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/mpi/values.h"

namespace tessel::dist {
namespace {

using testing::rank_values;
using testing::reduced_values;

TEST(MpiAsync, ManyInFlightWaitedInReverse) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  const int64_t n = 4099;
  std::vector<at::Tensor> ar, ag_in, ag_out, rs_in, rs_out, bc;
  std::vector<WorkPtr> works;
  for (int k = 0; k < 6; ++k) {
    ar.push_back(rank_values(me, n, at::kBFloat16, 0, k));
    works.push_back(w->all_reduce_async(ar.back(), ReduceOp::Sum));
    ag_in.push_back(rank_values(me, n, at::kFloat, 0, k));
    ag_out.push_back(at::zeros({size * n}));
    works.push_back(w->all_gather_into_async(ag_out.back(), ag_in.back()));
    rs_in.push_back(rank_values(me, size * n, at::kFloat, 0, k));
    rs_out.push_back(at::zeros({n}));
    works.push_back(w->reduce_scatter_from_async(rs_out.back(), rs_in.back(), ReduceOp::Max));
    bc.push_back(rank_values(me, n, at::kLong, 0, k));
    works.push_back(w->broadcast_async(bc.back(), k % size));
  }
  // Compute on this thread while the collectives run.
  at::Tensor x = at::randn({256, 256});
  at::Tensor y = at::mm(x, x);
  EXPECT_EQ(y.size(0), 256);
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  for (auto& work : works) EXPECT_TRUE(work->is_completed());
  for (int k = 0; k < 6; ++k) {
    EXPECT_TRUE(at::equal(ar[k], reduced_values(size, n, at::kBFloat16, false, 0, k))) << k;
    std::vector<at::Tensor> parts;
    for (int r = 0; r < size; ++r) parts.push_back(rank_values(r, n, at::kFloat, 0, k));
    EXPECT_TRUE(at::equal(ag_out[k], at::cat(parts))) << k;
    EXPECT_TRUE(at::equal(rs_out[k], reduced_values(size, n, at::kFloat, true, me * n, k))) << k;
    EXPECT_TRUE(at::equal(bc[k], rank_values(k % size, n, at::kLong, 0, k))) << k;
  }
}

TEST(MpiAsync, InterleavedWithSubCommunicator) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  CommunicatorPtr half = w->split(me % 2, me, "parity");
  const int64_t n = 1000;
  at::Tensor a = rank_values(me, n, at::kFloat, 0, 1);
  at::Tensor b = rank_values(me, n, at::kHalf, 0, 2);
  at::Tensor c = rank_values(me, n, at::kLong, 0, 3);
  WorkPtr wa = w->all_reduce_async(a, ReduceOp::Sum);
  WorkPtr wb = half->all_reduce_async(b, ReduceOp::Sum);
  WorkPtr wc = w->all_reduce_async(c, ReduceOp::Max);
  wc->wait();
  wb->wait();
  wa->wait();
  EXPECT_TRUE(at::equal(a, reduced_values(size, n, at::kFloat, false, 0, 1)));
  EXPECT_TRUE(at::equal(c, reduced_values(size, n, at::kLong, true, 0, 3)));
  at::Tensor expected_b = at::zeros({n}, at::kLong);
  for (int r = me % 2; r < size; r += 2) expected_b += rank_values(r, n, at::kLong, 0, 2);
  EXPECT_TRUE(at::equal(b, expected_b.to(at::kHalf)));
}

TEST(MpiAsync, IsCompletedBecomesTrueWithoutWait) {
  CommunicatorPtr w = world();
  at::Tensor t = at::ones({8});
  WorkPtr work = w->all_reduce_async(t, ReduceOp::Sum);
  while (!work->is_completed()) std::this_thread::yield();
  EXPECT_TRUE(at::equal(t, at::full({8}, static_cast<float>(w->size()))));
  work->wait();
}

TEST(MpiAsync, TensorsDroppedByCallerStayAlive) {
  // The queued task holds references: dropping the caller's handles before
  // wait() must not free the buffers under MPI.
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  at::Tensor out = at::zeros({size * 64});
  WorkPtr work;
  {
    at::Tensor in = rank_values(me, 64, at::kFloat);
    work = w->all_gather_into_async(out, in);
  }
  work->wait();
  std::vector<at::Tensor> parts;
  for (int r = 0; r < size; ++r) parts.push_back(rank_values(r, 64, at::kFloat));
  EXPECT_TRUE(at::equal(out, at::cat(parts)));
}

// The ring shift of context parallelism: several in flight on one group
// (each rank receives its predecessor's tensor, in issue order), next to a
// collective of the same group, for every dtype the blocks use; the counters
// say each shift sent its bytes once, to one peer.
TEST(MpiAsync, RingShiftsInFlightReachTheNextRankInOrder) {
  CommunicatorPtr w = world();
  const int size = w->size(), me = w->rank();
  const int previous = (me + size - 1) % size;
  w->reset_counters();
  const int64_t n = 777;
  std::vector<at::Tensor> in, out;
  std::vector<WorkPtr> works;
  const std::vector<at::ScalarType> dtypes = {at::kFloat, at::kDouble, at::kBFloat16, at::kLong};
  for (int k = 0; k < 8; ++k) {
    const at::ScalarType dtype = dtypes[static_cast<size_t>(k) % dtypes.size()];
    in.push_back(rank_values(me, n, dtype, 0, k));
    out.push_back(at::zeros({n}, dtype));
    works.push_back(w->ring_shift_async(out.back(), in.back()));
  }
  at::Tensor sum = rank_values(me, n, at::kFloat, 0, 9);
  WorkPtr reduce = w->all_reduce_async(sum, ReduceOp::Sum);
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  reduce->wait();
  for (int k = 0; k < 8; ++k) {
    const at::ScalarType dtype = dtypes[static_cast<size_t>(k) % dtypes.size()];
    EXPECT_TRUE(at::equal(out[k], rank_values(previous, n, dtype, 0, k))) << k;
  }
  EXPECT_TRUE(at::equal(sum, reduced_values(size, n, at::kFloat, false, 0, 9)));
  const CollectiveCounters c = w->counters();
  EXPECT_EQ(c.count(CollectiveKind::RingShift), 8);
  int64_t bytes = 0;
  for (const auto& t : in) bytes += static_cast<int64_t>(t.nbytes());
  EXPECT_EQ(c.sent_same_node[static_cast<int>(CollectiveKind::RingShift)], bytes);
  // Shapes must agree; out and in may not share memory.
  at::Tensor t = at::zeros({8});
  EXPECT_THROW(w->ring_shift_async(t, t), Error);
  EXPECT_THROW(w->ring_shift_async(at::zeros({7}), t), Error);
}

}  // namespace
}  // namespace tessel::dist
