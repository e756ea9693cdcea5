// The order a device collective puts on streams (dist/stream_ordered_work.h),
// as data: issue makes the communication stream wait for the computation so
// far, launches there and marks the end; wait() makes the compute stream wait
// for that end without blocking the host; the tensors live as long as the
// Work; the stall a wait caused is counted once both events have passed, and
// passed stalls are let go even where nothing reads the total.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/caller_wait_time.h"
#include "dist/recording_streams.h"
#include "dist/stream_ordered_work.h"

namespace tessel::dist {
namespace {

using testing::RecordingStreams;

TEST(StreamOrderedWork,
     IssueOrdersTheCollectiveAfterTheComputationAndWaitOrdersTheComputationAfterIt) {
  RecordingStreams streams;
  CollectiveStream comm(streams, nullptr);
  bool launched_on_comm = false;
  WorkPtr work = comm.issue("all_gather", "dp_shard (ranks 0,1)", std::chrono::seconds(5), {},
                            [&](const device::Stream& s) {
                              launched_on_comm = s.describe() == "comm1";
                              streams.log.push_back("launch on " + s.describe());
                            });
  EXPECT_TRUE(launched_on_comm);
  const std::vector<std::string> issued = {"record compute e1", "wait comm1 on e1",
                                           "launch on comm1", "record comm1 e2 timed"};
  EXPECT_EQ(streams.log, issued);
  // Nothing blocks: the collective has not finished, yet wait() returns.
  EXPECT_FALSE(work->is_completed());
  work->wait();
  std::vector<std::string> waited = issued;
  waited.insert(waited.end(), {"record compute e3 timed", "wait compute on e2"});
  EXPECT_EQ(streams.log, waited);
  work->wait();  // once ordered, always ordered
  EXPECT_EQ(streams.log, waited);
  streams.events[1]->passed = true;
  EXPECT_TRUE(work->is_completed());
}

TEST(StreamOrderedWork, EachGroupHasAStreamOfItsOwn) {
  RecordingStreams streams;
  CollectiveStream a(streams, nullptr), b(streams, nullptr);
  EXPECT_NE(a.stream().describe(), b.stream().describe());
}

TEST(StreamOrderedWork, TheTensorsLiveAsLongAsTheWork) {
  RecordingStreams streams;
  CollectiveStream comm(streams, nullptr);
  at::Tensor t = at::ones({4});
  const auto before = t.use_count();
  WorkPtr work =
      comm.issue("all_reduce", "g", std::chrono::seconds(5), {t}, [](const device::Stream&) {});
  EXPECT_EQ(t.use_count(), before + 1);
  work->wait();
  EXPECT_EQ(t.use_count(), before + 1);  // waited is not finished: the device may still read it
  work.reset();
  EXPECT_EQ(t.use_count(), before);
}

TEST(StreamOrderedWork, AWaitCountsTheComputeStreamsStallOnceBothEventsHavePassed) {
  RecordingStreams streams;
  CollectiveStream comm(streams, nullptr);
  // The collective ends at 30 ms; the compute stream reaches the wait at 10 ms: 20 ms stalled.
  streams.clock_ms = 30.0;
  WorkPtr late =
      comm.issue("all_gather", "g", std::chrono::seconds(5), {}, [](const device::Stream&) {});
  streams.clock_ms = 10.0;
  const double before = caller_wait_seconds();
  late->wait();
  EXPECT_DOUBLE_EQ(caller_wait_seconds(), before);  // not measurable yet
  for (auto& e : streams.events) e->passed = true;
  EXPECT_NEAR(caller_wait_seconds() - before, 0.020, 1e-12);
  // One that had finished before the stream got there costs nothing.
  streams.clock_ms = 40.0;
  WorkPtr early =
      comm.issue("all_gather", "g", std::chrono::seconds(5), {}, [](const device::Stream&) {});
  streams.clock_ms = 55.0;
  early->wait();
  for (auto& e : streams.events) e->passed = true;
  EXPECT_NEAR(caller_wait_seconds() - before, 0.020, 1e-12);
}

TEST(StreamOrderedWork, PassedStallsAreCountedAndDroppedWithoutAReader) {
  // A command that never reads comm_wait_s (generation) must not keep every
  // wait's events: once enough are pending, the passed ones are counted and
  // let go, and the total still counts each one once.
  const double before = caller_wait_seconds();
  auto events = std::make_shared<int>(0);  // stands for the events a stall holds
  constexpr int kWaits = 5000;
  for (int i = 0; i < kWaits; ++i) {
    add_stream_wait([events]() -> std::optional<double> { return 0.001; });
  }
  EXPECT_LT(events.use_count(), 1 + 2048) << "stalls kept after their events passed";
  // One whose events have not passed stays pending through the folds.
  bool passed = false;
  add_stream_wait([&passed]() -> std::optional<double> {
    return passed ? std::optional<double>(0.5) : std::nullopt;
  });
  for (int i = 0; i < kWaits; ++i) add_stream_wait([]() -> std::optional<double> { return 0.0; });
  EXPECT_NEAR(caller_wait_seconds() - before, kWaits * 0.001, 1e-9);
  EXPECT_EQ(events.use_count(), 1);
  passed = true;
  EXPECT_NEAR(caller_wait_seconds() - before, kWaits * 0.001 + 0.5, 1e-9);
}

}  // namespace
}  // namespace tessel::dist
