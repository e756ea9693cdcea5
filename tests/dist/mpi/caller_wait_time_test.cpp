// The time a thread spends held up by collectives (dist/caller_wait_time.h),
// what `tessel train` reports as a step's comm_wait_s. A peer that joins a
// collective late holds every other rank up at least as long as its delay
// (the collective cannot finish before the last rank joins), whichever path
// the collective takes: waited on asynchronously or run on the caller's
// thread. Time spent computing, or waiting on another thread, is not counted,
// but for waits staged through host memory for device tensors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "dist/caller_wait_time.h"
#include "dist/communicator.h"
#include "dist/mpi/values.h"

namespace tessel::dist {
namespace {

constexpr auto kDelay = std::chrono::milliseconds(400);
// Below kDelay by more than ranks' skew leaving a barrier.
constexpr double kSurelyHeldUp = 0.2;

// Rank 0 joins `collective` kDelay late; returns this thread's time in collectives meanwhile.
template <class F>
double waited_for_late_rank_0(Communicator& w, F collective) {
  w.barrier();
  const double before = caller_wait_seconds();
  if (w.rank() == 0) std::this_thread::sleep_for(kDelay);
  collective();
  return caller_wait_seconds() - before;
}

TEST(CallerWaitTime, ALatePeerHoldsUpAsyncWaitAndCallerRunCollectives) {
  CommunicatorPtr w = world();
  at::Tensor t = testing::rank_values(w->rank(), 1 << 16, at::kFloat, 0, 1);
  const double async_wait = waited_for_late_rank_0(*w, [&] { w->all_reduce_async(t, ReduceOp::Sum)->wait(); });
  const double caller_run = waited_for_late_rank_0(*w, [&] { w->all_reduce(t, ReduceOp::Sum); });
  if (w->rank() != 0) {
    EXPECT_GE(async_wait, kSurelyHeldUp);
    EXPECT_GE(caller_run, kSurelyHeldUp);
  }
  EXPECT_GE(async_wait, 0.0);
  EXPECT_GE(caller_run, 0.0);
}

TEST(CallerWaitTime, ComputeAndOtherThreadsWaitsAreNotCounted) {
  CommunicatorPtr w = world();
  w->barrier();
  const double before = caller_wait_seconds();
  at::Tensor x = at::randn({128, 128});
  at::Tensor y = at::mm(x, x);
  EXPECT_EQ(y.size(0), 128);
  // Another thread waits for a collective a late rank holds up.
  at::Tensor t = testing::rank_values(w->rank(), 1024, at::kFloat, 0, 2);
  double other_thread_waited = 0.0;
  std::thread other([&] {
    const double start = caller_wait_seconds();
    if (w->rank() == 0) std::this_thread::sleep_for(kDelay);
    w->all_reduce_async(t, ReduceOp::Sum)->wait();
    other_thread_waited = caller_wait_seconds() - start;
  });
  other.join();
  EXPECT_EQ(caller_wait_seconds(), before);
  if (w->rank() != 0) {
    EXPECT_GE(other_thread_waited, kSurelyHeldUp);
  }
}

// A wait staged through host memory for device tensors counts for the whole
// process (a device's backward waits on the autograd engine's thread), and
// once: not again by the host collective's own timer inside it.
TEST(CallerWaitTime, StagedWaitsCountOnceForTheWholeProcess) {
  constexpr auto kWait = std::chrono::milliseconds(50);
  const double before = caller_wait_seconds();
  const auto start = std::chrono::steady_clock::now();
  {
    const StagedWaitTimer staged;
    const CallerWaitTimer host_collective;
    std::this_thread::sleep_for(kWait);
  }
  const double around = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double counted = caller_wait_seconds() - before;
  EXPECT_GE(counted, 0.05);
  EXPECT_LE(counted, around) << "counted twice";

  const double before_other = caller_wait_seconds();
  std::thread autograd_like([&] {
    const StagedWaitTimer staged;
    std::this_thread::sleep_for(kWait);
  });
  autograd_like.join();
  EXPECT_GE(caller_wait_seconds() - before_other, 0.05) << "another thread's staged wait";
}

}  // namespace
}  // namespace tessel::dist
