// The watch over device collectives (dist/collective_watch.h): a collective
// whose end event has not passed by its deadline ends the job naming it; one
// that finished is forgotten; a health check's complaint, or an error of the
// device while the watch asks it, ends the job with its message. The endings
// are the test's own here, recording instead of aborting.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "dist/collective_watch.h"
#include "dist/recording_streams.h"

namespace tessel::dist {
namespace {

using namespace std::chrono_literals;
using testing::FakeEvent;

struct Ended {
  std::mutex mutex;
  std::string how;
};

CollectiveWatch::Endings recording(Ended& ended) {
  CollectiveWatch::Endings e;
  e.timed_out = [&ended](const char* collective, const std::string& group,
                         std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> lock(ended.mutex);
    ended.how = std::string(collective) + " on " + group + " after " +
                std::to_string(timeout.count()) + " ms";
  };
  e.failed = [&ended](const std::string& message) {
    std::lock_guard<std::mutex> lock(ended.mutex);
    ended.how = message;
  };
  return e;
}

std::string wait_for_ending(Ended& ended) {
  for (int i = 0; i < 400; ++i) {
    {
      std::lock_guard<std::mutex> lock(ended.mutex);
      if (!ended.how.empty()) return ended.how;
    }
    std::this_thread::sleep_for(5ms);
  }
  return "";
}

TEST(CollectiveWatch, AnUnfinishedCollectiveEndsTheJobNamingItAtItsDeadline) {
  Ended ended;
  CollectiveWatch watch(recording(ended), 2ms);
  auto finished = std::make_shared<FakeEvent>("a", 0.0);
  finished->passed = true;
  watch.watch("all_gather", "dp_shard (ranks 0,1)", 20ms, finished);
  watch.watch("reduce_scatter", "dp_shard (ranks 0,1)", 20ms,
              std::make_shared<FakeEvent>("b", 0.0));
  EXPECT_EQ(wait_for_ending(ended), "reduce_scatter on dp_shard (ranks 0,1) after 20 ms");
}

TEST(CollectiveWatch, FinishedCollectivesAreForgotten) {
  Ended ended;
  CollectiveWatch watch(recording(ended), 2ms);
  auto e = std::make_shared<FakeEvent>("a", 0.0);
  watch.watch("all_reduce", "g", 10s, e);
  EXPECT_EQ(watch.watched(), 1U);
  e->passed = true;
  for (int i = 0; i < 400 && watch.watched() > 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(watch.watched(), 0U);
  std::lock_guard<std::mutex> lock(ended.mutex);
  EXPECT_EQ(ended.how, "");
}

TEST(CollectiveWatch, AHealthCheckComplaintEndsTheJobWithItsMessage) {
  Ended ended;
  CollectiveWatch watch(recording(ended), 2ms);
  std::atomic<bool> broken{false};
  const uint64_t quiet = watch.add_health_check([] { return std::string(); });
  watch.add_health_check(
      [&broken] { return broken ? std::string("NCCL error on group 'tp'") : std::string(); });
  watch.forget_health_check(quiet);
  std::this_thread::sleep_for(20ms);
  {
    std::lock_guard<std::mutex> lock(ended.mutex);
    EXPECT_EQ(ended.how, "");
  }
  broken = true;
  EXPECT_EQ(wait_for_ending(ended), "NCCL error on group 'tp'");
}

// An event whose query fails, as a CUDA event does once a kernel has hit a
// sticky error: the watch thread must end the job with the error's text.
class FailingEvent : public device::Event {
 public:
  bool query() override { throw std::runtime_error("cudaEventQuery failed: an illegal memory access"); }
  void synchronize() override {}
};

TEST(CollectiveWatch, ADeviceErrorWhileWatchingEndsTheJobWithItsText) {
  Ended ended;
  CollectiveWatch watch(recording(ended), 2ms);
  watch.watch("all_reduce", "dp_replicate (ranks 0,2)", 10s, std::make_shared<FailingEvent>());
  EXPECT_EQ(wait_for_ending(ended),
            "collective all_reduce on group 'dp_replicate (ranks 0,2)' failed on the device: "
            "cudaEventQuery failed: an illegal memory access");
}

}  // namespace
}  // namespace tessel::dist
