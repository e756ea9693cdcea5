#include "dist/caller_wait_time.h"

#include <mutex>
#include <utility>
#include <vector>

namespace tessel::dist {
namespace {

thread_local double seconds_waited = 0.0;

// The compute streams' stalls: measured, and still waiting for their events.
struct StreamStalls {
  std::mutex mutex;
  double measured = 0.0;
  std::vector<std::function<std::optional<double>()>> pending;
};

StreamStalls& stream_stalls() {
  static auto* stalls = new StreamStalls();  // never destroyed: read until the process ends
  return *stalls;
}

}  // namespace

double caller_wait_seconds() {
  StreamStalls& s = stream_stalls();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::vector<std::function<std::optional<double>()>> still;
  for (auto& stall : s.pending) {
    if (const auto seconds = stall()) {
      s.measured += *seconds;
    } else {
      still.push_back(std::move(stall));
    }
  }
  s.pending = std::move(still);
  return seconds_waited + s.measured;
}

void add_stream_wait(std::function<std::optional<double>()> stall_seconds) {
  StreamStalls& s = stream_stalls();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.pending.push_back(std::move(stall_seconds));
}

CallerWaitTimer::~CallerWaitTimer() {
  seconds_waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace tessel::dist
