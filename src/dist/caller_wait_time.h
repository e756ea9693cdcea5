// How long a thread has been held up by collectives: waiting in
// Work::wait() for the communication thread to finish one, or running one
// itself (a collective its caller waits for at once, run on the caller's
// thread, progress_engine.h). For the training thread that is the step's
// communication that nothing overlapped: the training loop reads it around
// each step (metrics.jsonl "comm_wait_s"), so a user sees how much of a step
// went to waiting on peers and links instead of computing.
//
// Per thread (thread_local), never reset: callers take differences.
#pragma once

#include <chrono>

namespace tessel::dist {

// Seconds this thread has spent in collectives so far.
double caller_wait_seconds();

// Adds the time from construction to destruction to this thread's total.
class CallerWaitTimer {
 public:
  CallerWaitTimer() : start_(std::chrono::steady_clock::now()) {}
  ~CallerWaitTimer();
  CallerWaitTimer(const CallerWaitTimer&) = delete;
  CallerWaitTimer& operator=(const CallerWaitTimer&) = delete;

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tessel::dist
