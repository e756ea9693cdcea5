#include "dist/watchdog.h"

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

Watchdog::Watchdog(int world_rank) : world_rank_(world_rank), thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::arm(const char* collective, const std::string& group,
                   std::chrono::milliseconds timeout) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = true;
    collective_ = collective;
    group_ = group;
    timeout_ = timeout;
    deadline_ = std::chrono::steady_clock::now() + timeout;
  }
  cv_.notify_all();
}

void Watchdog::disarm() {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = false;  // no notify: the thread finds out at its deadline, and blocking calls are short
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || armed_; });
    if (stopping_) return;
    const auto deadline = deadline_;
    cv_.wait_until(lock, deadline, [&] { return stopping_ || !armed_ || deadline_ != deadline; });
    if (stopping_) return;
    if (armed_ && deadline_ == deadline && std::chrono::steady_clock::now() >= deadline) {
      // MPI_THREAD_MULTIPLE lets this thread abort while another sits in MPI.
      abort_job_on_timeout(collective_, group_, timeout_, world_rank_);
    }
  }
}

}  // namespace tessel::dist
