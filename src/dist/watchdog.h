// Watchdog: ends the job when a blocking MPI call runs past its collective
// timeout. The progress engine runs a collective as the blocking MPI call
// when its caller waits at once and nothing else is in flight (the blocking
// algorithms are faster than OpenMPI's nonblocking ones, docs/bench/comm.md);
// a blocking call cannot poll its own deadline, so this thread does.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
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

  // Between arm() and disarm() the calling thread is inside one blocking
  // collective; past `timeout` the job is ended with the collective's name.
  void arm(const char* collective, const std::string& group, std::chrono::milliseconds timeout);
  void disarm();

 private:
  void loop();

  const int world_rank_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool armed_ = false;
  const char* collective_ = "";
  std::string group_;
  std::chrono::milliseconds timeout_{0};
  std::chrono::steady_clock::time_point deadline_;
  std::thread thread_;
};

// Arms the watchdog for the lifetime of a scope.
class WatchdogArmed {
 public:
  WatchdogArmed(Watchdog& watchdog, const char* collective, const std::string& group,
                std::chrono::milliseconds timeout)
      : watchdog_(watchdog) {
    watchdog_.arm(collective, group, timeout);
  }
  ~WatchdogArmed() { watchdog_.disarm(); }
  WatchdogArmed(const WatchdogArmed&) = delete;
  WatchdogArmed& operator=(const WatchdogArmed&) = delete;

 private:
  Watchdog& watchdog_;
};

}  // namespace tessel::dist
