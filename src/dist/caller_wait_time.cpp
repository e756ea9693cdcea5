#include "dist/caller_wait_time.h"

namespace tessel::dist {
namespace {

thread_local double seconds_waited = 0.0;

}  // namespace

double caller_wait_seconds() { return seconds_waited; }

CallerWaitTimer::~CallerWaitTimer() {
  seconds_waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace tessel::dist
