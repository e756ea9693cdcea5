// Watchdog: ends the job when a blocking MPI call runs past its collective
// timeout. A collective whose caller waits at once runs as the blocking MPI
// call (OpenMPI's blocking algorithms are faster than its nonblocking ones,
// docs/bench/comm.md), on the caller's thread or the engine's; a blocking
// call cannot poll its own deadline, so this thread does, for any number of
// calls at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace tessel::dist {

// Prints timeout_message() to stderr and ends the whole job (MPI_Abort on the
// world). Used by the engine's polling path and by the watchdog alike.
[[noreturn]] void abort_job_on_timeout(const char* collective, const std::string& group,
                                       std::chrono::milliseconds timeout, int world_rank);

class Watchdog {
 public:
  explicit Watchdog(int world_rank);
  ~Watchdog();  // stops and joins the thread
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Between arm() and disarm(token) a thread is inside one blocking
  // collective; past `timeout` the job is ended with the collective's name.
  uint64_t arm(const char* collective, const std::string& group, std::chrono::milliseconds timeout);
  void disarm(uint64_t token);

 private:
  struct Call {
    const char* collective;
    std::string group;
    std::chrono::milliseconds timeout;
    std::chrono::steady_clock::time_point deadline;
  };
  void loop();

  const int world_rank_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  uint64_t next_token_ = 1;
  std::map<uint64_t, Call> armed_;
  // When the thread wakes next on its own (max(): not before a notify). A
  // call is armed on every synchronous collective, so arm() wakes the thread
  // only when the new deadline comes before that: waking it costs a
  // context switch per collective where ranks share cores.
  std::chrono::steady_clock::time_point sleeping_until_ = std::chrono::steady_clock::time_point::max();
  std::thread thread_;
};

// Arms the watchdog for the lifetime of a scope.
class WatchdogArmed {
 public:
  WatchdogArmed(Watchdog& watchdog, const char* collective, const std::string& group,
                std::chrono::milliseconds timeout)
      : watchdog_(watchdog), token_(watchdog.arm(collective, group, timeout)) {}
  ~WatchdogArmed() { watchdog_.disarm(token_); }
  WatchdogArmed(const WatchdogArmed&) = delete;
  WatchdogArmed& operator=(const WatchdogArmed&) = delete;

 private:
  Watchdog& watchdog_;
  uint64_t token_;
};

}  // namespace tessel::dist
