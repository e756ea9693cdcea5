// The single-process backend: each collective is its one-rank math (copies or
// no-ops), errors name the collective and group, split gives a group of one,
// and counters count.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/single_process_communicator.h"

namespace tessel::dist {
namespace {

at::Tensor iota(int64_t n, at::ScalarType dtype) {
  return at::arange(n, at::TensorOptions().dtype(at::kLong)).mul(3).sub(7).to(dtype);
}

class SingleProcess : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(SingleProcess, AllGatherCopies) {
  SingleProcessCommunicator comm;
  at::Tensor in = iota(10, GetParam());
  at::Tensor out = at::zeros({10}, in.options());
  comm.all_gather_into(out, in);
  EXPECT_TRUE(at::equal(out, in));
}

TEST_P(SingleProcess, ReduceScatterCopiesForSumAndMax) {
  SingleProcessCommunicator comm;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max}) {
    at::Tensor in = iota(6, GetParam()).view({2, 3});
    at::Tensor out = at::zeros({6}, in.options());
    comm.reduce_scatter_from(out, in, op);
    EXPECT_TRUE(at::equal(out, in.view(-1)));
  }
}

TEST_P(SingleProcess, AllReduceLeavesTensor) {
  SingleProcessCommunicator comm;
  at::Tensor t = iota(9, GetParam());
  at::Tensor expected = t.clone();
  comm.all_reduce(t, ReduceOp::Sum);
  EXPECT_TRUE(at::equal(t, expected));
  comm.all_reduce(t, ReduceOp::Max);
  EXPECT_TRUE(at::equal(t, expected));
}

TEST_P(SingleProcess, AllToAllAndBroadcast) {
  SingleProcessCommunicator comm;
  at::Tensor in = iota(8, GetParam());
  at::Tensor out = at::zeros_like(in);
  comm.all_to_all(out, in);
  EXPECT_TRUE(at::equal(out, in));
  at::Tensor rows = at::zeros({4, 2}, in.options());
  comm.all_to_all_v(rows, {4}, in.view({4, 2}), {4});
  EXPECT_TRUE(at::equal(rows.view(-1), in));
  at::Tensor b = in.clone();
  comm.broadcast(b, 0);
  EXPECT_TRUE(at::equal(b, in));
  comm.barrier();
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SingleProcess,
                         ::testing::Values(at::kFloat, at::kBFloat16, at::kHalf, at::kLong));

TEST(SingleProcessComm, EmptyTensors) {
  SingleProcessCommunicator comm;
  at::Tensor e = at::empty({0});
  at::Tensor o = at::empty({0});
  comm.all_gather_into(o, e);
  comm.reduce_scatter_from(o, e);
  comm.all_reduce(e);
  comm.all_to_all(o, e);
  comm.broadcast(e, 0);
  EXPECT_EQ(comm.counters().count(CollectiveKind::AllGather), 1);
}

TEST(SingleProcessComm, AsyncWorkIsCompleted) {
  SingleProcessCommunicator comm;
  at::Tensor t = at::ones({4});
  WorkPtr w = comm.all_reduce_async(t, ReduceOp::Sum);
  EXPECT_TRUE(w->is_completed());
  w->wait();
  EXPECT_TRUE(at::equal(t, at::ones({4})));
}

TEST(SingleProcessComm, InPlaceAllGather) {
  SingleProcessCommunicator comm;
  at::Tensor out = at::arange(5, at::kFloat);
  comm.all_gather_into(out, out.narrow(0, 0, 5));
  EXPECT_TRUE(at::equal(out, at::arange(5, at::kFloat)));
}

TEST(SingleProcessComm, RequiresGradTensorsAreAccepted) {
  SingleProcessCommunicator comm;
  at::Tensor in = at::ones({3}).requires_grad_(true);
  at::Tensor out = at::zeros({3});
  comm.all_gather_into(out, in);
  EXPECT_TRUE(at::equal(out, at::ones({3})));
}

TEST(SingleProcessComm, IdentityAndSplit) {
  SingleProcessCommunicator comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.name(), "world");
  EXPECT_EQ(comm.world_ranks(), std::vector<int>{0});
  comm.set_timeout(std::chrono::seconds(7));
  CommunicatorPtr sub = comm.split(3, 0, "tp");
  EXPECT_EQ(sub->size(), 1);
  EXPECT_EQ(sub->rank(), 0);
  EXPECT_EQ(sub->name(), "tp (ranks 0)");
  EXPECT_EQ(sub->timeout(), std::chrono::seconds(7));
  EXPECT_THROW(comm.split(-1, 0, "bad"), Error);
}

TEST(SingleProcessComm, CountersCountCallsAndBytes) {
  SingleProcessCommunicator comm;
  at::Tensor in = at::zeros({4});
  at::Tensor out = at::zeros({4});
  comm.all_gather_into(out, in);
  comm.all_gather_into(out, in);
  comm.reduce_scatter_from(out, in);
  comm.all_reduce(in.to(at::kBFloat16));
  comm.barrier();
  CollectiveCounters c = comm.counters();
  EXPECT_EQ(c.count(CollectiveKind::AllGather), 2);
  EXPECT_EQ(c.bytes[static_cast<int>(CollectiveKind::AllGather)], 32);
  EXPECT_EQ(c.count(CollectiveKind::ReduceScatter), 1);
  EXPECT_EQ(c.count(CollectiveKind::AllReduce), 1);
  EXPECT_EQ(c.bytes[static_cast<int>(CollectiveKind::AllReduce)], 8);
  EXPECT_EQ(c.count(CollectiveKind::Barrier), 1);
  EXPECT_EQ(c.count(CollectiveKind::AllToAll), 0);
  comm.reset_counters();
  EXPECT_EQ(comm.counters().count(CollectiveKind::AllGather), 0);
}

TEST(SingleProcessComm, WorldIsSingleProcessAndStable) {
  CommunicatorPtr w = world();
  EXPECT_EQ(w->size(), 1);
  EXPECT_EQ(w.get(), world().get());
  EXPECT_STREQ(to_string(CollectiveKind::ReduceScatter), "reduce_scatter");
}

}  // namespace
}  // namespace tessel::dist
