#include "dist/watchdog.h"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>

#include "dist/mpi_c.h"
#include "dist/timeout.h"

namespace tessel::dist {

void abort_job_on_timeout(const char* collective, const std::string& group,
                          std::chrono::milliseconds timeout, int world_rank) {
  const std::string message = timeout_message(collective, group, timeout, world_rank);
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);  // MPI_Abort does not return; this is for the linter and odd MPIs
}

Watchdog::Watchdog(int world_rank)
    : world_rank_(world_rank), thread_([this] {
        pthread_setname_np(pthread_self(), "tessel-watchdog");
        loop();
      }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t Watchdog::arm(const char* collective, const std::string& group,
                       std::chrono::milliseconds timeout) {
  uint64_t token;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    token = next_token_++;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    armed_.emplace(token, Call{collective, group, timeout, deadline});
    wake = deadline < sleeping_until_;
  }
  if (wake) cv_.notify_all();
  return token;
}

void Watchdog::disarm(uint64_t token) {
  std::lock_guard<std::mutex> lock(mutex_);
  // No notify: the thread finds out at the deadline it sleeps towards, and
  // blocking calls are short next to their timeouts.
  armed_.erase(token);
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (stopping_) return;
    if (armed_.empty()) {
      sleeping_until_ = std::chrono::steady_clock::time_point::max();
      cv_.wait(lock);
      continue;
    }
    auto earliest = armed_.begin();
    for (auto it = armed_.begin(); it != armed_.end(); ++it) {
      if (it->second.deadline < earliest->second.deadline) earliest = it;
    }
    if (std::chrono::steady_clock::now() >= earliest->second.deadline) {
      // MPI_THREAD_MULTIPLE lets this thread abort while another sits in MPI.
      const Call call = earliest->second;
      abort_job_on_timeout(call.collective, call.group, call.timeout, world_rank_);
    }
    // Woken early by a new call (maybe with an earlier deadline) or to stop.
    sleeping_until_ = earliest->second.deadline;  // the entry may go while we wait
    cv_.wait_until(lock, sleeping_until_);
  }
}

}  // namespace tessel::dist
