// How long a thread has been held up by collectives: waiting in
// Work::wait() for the communication thread to finish one, or running one
// itself (a collective its caller waits for at once, run on the caller's
// thread, progress_engine.h). For the training thread that is the step's
// communication that nothing overlapped: the training loop reads it around
// each step (metrics.jsonl "comm_wait_s"), so a user sees how much of a step
// went to waiting on peers and links instead of computing.
//
// Per thread (thread_local), never reset: callers take differences.
//
// On a device (SPEC 10) waiting does not block the host (but for the staged
// path: StagedWaitTimer below): Work::wait() makes
// the compute stream wait for the collective's event. What the computation
// lost is then the time the compute stream stood still, measured by the
// device's own clock: from the moment the stream reached the wait to the
// moment the collective finished (nothing when it had finished already). It
// is known only once both events have passed, so stream waits are recorded
// as pending and counted once measurable; and since a device's backward runs
// on the autograd engine's thread, not the training thread, they count for
// the whole process, on every thread's reading.
#pragma once

#include <chrono>
#include <functional>
#include <optional>

namespace tessel::dist {

// Seconds this thread has spent in collectives so far, plus the compute
// streams' measured stalls of the whole process.
double caller_wait_seconds();

// A stream wait to count: `stall_seconds` returns the stall once its events
// have passed, std::nullopt before.
void add_stream_wait(std::function<std::optional<double>()> stall_seconds);

// Adds the time from construction to destruction to this thread's total
// (nothing while a StagedWaitTimer is alive on the thread).
class CallerWaitTimer {
 public:
  CallerWaitTimer() : start_(std::chrono::steady_clock::now()) {}
  ~CallerWaitTimer();
  CallerWaitTimer(const CallerWaitTimer&) = delete;
  CallerWaitTimer& operator=(const CallerWaitTimer&) = delete;

 private:
  std::chrono::steady_clock::time_point start_;
};

// A wait for a collective that device tensors make through host memory
// (dist/device_communicator.cpp's staged path: several ranks on one GPU, or
// TESSEL_COMM=mpi): counted for the whole process, as the device's stream
// stalls are, since a device's backward waits on the autograd engine's
// thread; the host collective's own CallerWaitTimer inside it counts nothing.
class StagedWaitTimer {
 public:
  StagedWaitTimer();
  ~StagedWaitTimer();
  StagedWaitTimer(const StagedWaitTimer&) = delete;
  StagedWaitTimer& operator=(const StagedWaitTimer&) = delete;

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tessel::dist
