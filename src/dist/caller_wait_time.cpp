#include "dist/caller_wait_time.h"

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace tessel::dist {
namespace {

thread_local double seconds_waited = 0.0;
thread_local int staged_waits_open = 0;  // StagedWaitTimers alive on this thread

// Pending stalls at which add_stream_wait counts the measurable ones itself:
// a command that never reads the total (generation, log-probs) would
// otherwise keep every wait's pair of device events until it ends. Each fold
// sets the next at twice what is still pending, so waits that outrun the
// device cost amortised constant time, not a sweep per wait.
constexpr size_t kPendingToFold = 1024;

// The compute streams' stalls (measured, and still waiting for their events)
// and the staged waits: what counts for the whole process.
struct StreamStalls {
  std::mutex mutex;
  double measured = 0.0;
  std::vector<std::function<std::optional<double>()>> pending;
  size_t fold_at = kPendingToFold;  // add_stream_wait folds at this many pending
};

StreamStalls& stream_stalls() {
  static auto* stalls = new StreamStalls();  // never destroyed: read until the process ends
  return *stalls;
}

// Counts the stalls whose events have passed and forgets them (mutex held).
void fold_measurable(StreamStalls& s) {
  std::vector<std::function<std::optional<double>()>> still;
  for (auto& stall : s.pending) {
    if (const auto seconds = stall()) {
      s.measured += *seconds;
    } else {
      still.push_back(std::move(stall));
    }
  }
  s.pending = std::move(still);
  s.fold_at = std::max(kPendingToFold, 2 * s.pending.size());
}

}  // namespace

double caller_wait_seconds() {
  StreamStalls& s = stream_stalls();
  std::lock_guard<std::mutex> lock(s.mutex);
  fold_measurable(s);
  return seconds_waited + s.measured;
}

void add_stream_wait(std::function<std::optional<double>()> stall_seconds) {
  StreamStalls& s = stream_stalls();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.pending.push_back(std::move(stall_seconds));
  if (s.pending.size() >= s.fold_at) fold_measurable(s);
}

CallerWaitTimer::~CallerWaitTimer() {
  if (staged_waits_open > 0) return;  // the staged wait around it counts
  seconds_waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

StagedWaitTimer::StagedWaitTimer() : start_(std::chrono::steady_clock::now()) { ++staged_waits_open; }

StagedWaitTimer::~StagedWaitTimer() {
  --staged_waits_open;
  if (staged_waits_open > 0) return;  // an enclosing one counts
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  StreamStalls& s = stream_stalls();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.measured += seconds;
}

}  // namespace tessel::dist
