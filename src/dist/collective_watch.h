// CollectiveWatch: ends the job when a collective on a device stream does
// not finish within its timeout, or when the device's communication library
// reports an error (a failed or unreachable peer). On a device nobody blocks
// inside a collective (waits order streams, stream_ordered_work.h), so the
// host-side watchdog of the MPI backend (watchdog.h) has nothing to time:
// this thread polls each collective's completion event instead, and the
// health checks its owners register, and ends the job with the collective,
// the group and the rank named, as on the CPU (timeout.h's message).
//
// One per world: created with the first device communicator and shared by
// every communicator split from it (no process-wide instance).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "device/stream_ops.h"

namespace tessel::dist {

class CollectiveWatch {
 public:
  // How the job ends: by default abort_job_on_timeout / a message and
  // MPI_Abort; tests pass their own.
  struct Endings {
    std::function<void(const char* collective, const std::string& group,
                       std::chrono::milliseconds timeout)>
        timed_out;
    std::function<void(const std::string& message)> failed;
  };
  CollectiveWatch(int world_rank,
                  std::chrono::milliseconds poll_interval = std::chrono::milliseconds(100));
  CollectiveWatch(Endings endings, std::chrono::milliseconds poll_interval);
  ~CollectiveWatch();  // stops and joins the thread
  CollectiveWatch(const CollectiveWatch&) = delete;
  CollectiveWatch& operator=(const CollectiveWatch&) = delete;

  // A collective issued now must have passed `done` within `timeout`.
  void watch(const char* collective, const std::string& group, std::chrono::milliseconds timeout,
             device::EventPtr done);
  // Checked on every poll: returns a message when something is wrong (e.g.
  // NCCL's asynchronous error of a communicator), "" otherwise. Returns a
  // token for forget_health_check.
  uint64_t add_health_check(std::function<std::string()> check);
  void forget_health_check(uint64_t token);
  // Collectives being watched (not yet seen finished).
  size_t watched() const;

 private:
  struct Watched {
    const char* collective;
    std::string group;
    std::chrono::milliseconds timeout;
    std::chrono::steady_clock::time_point deadline;
    device::EventPtr done;
  };
  void loop();

  Endings endings_;
  const std::chrono::milliseconds poll_interval_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::list<Watched> watched_;
  uint64_t next_token_ = 1;
  std::vector<std::pair<uint64_t, std::function<std::string()>>> health_checks_;
  std::thread thread_;
};

}  // namespace tessel::dist
