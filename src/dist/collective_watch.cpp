#include "dist/collective_watch.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include <fmt/format.h>

#include "dist/mpi_c.h"
#include "dist/watchdog.h"

namespace tessel::dist {

namespace {

CollectiveWatch::Endings job_endings(int world_rank) {
  CollectiveWatch::Endings e;
  e.timed_out = [world_rank](const char* collective, const std::string& group,
                             std::chrono::milliseconds timeout) {
    abort_job_on_timeout(collective, group, timeout, world_rank);
  };
  e.failed = [](const std::string& message) {
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);
  };
  return e;
}

}  // namespace

CollectiveWatch::CollectiveWatch(int world_rank, std::chrono::milliseconds poll_interval)
    : CollectiveWatch(job_endings(world_rank), poll_interval) {}

CollectiveWatch::CollectiveWatch(Endings endings, std::chrono::milliseconds poll_interval)
    : endings_(std::move(endings)), poll_interval_(poll_interval), thread_([this] {
        pthread_setname_np(pthread_self(), "tessel-cwatch");
        loop();
      }) {}

CollectiveWatch::~CollectiveWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CollectiveWatch::watch(const char* collective, const std::string& group,
                            std::chrono::milliseconds timeout, device::EventPtr done) {
  std::lock_guard<std::mutex> lock(mutex_);
  watched_.push_back(Watched{collective, group, timeout, std::chrono::steady_clock::now() + timeout,
                             std::move(done)});
}

uint64_t CollectiveWatch::add_health_check(std::function<std::string()> check) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t token = next_token_++;
  health_checks_.emplace_back(token, std::move(check));
  return token;
}

void CollectiveWatch::forget_health_check(uint64_t token) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::erase_if(health_checks_, [token](const auto& entry) { return entry.first == token; });
}

size_t CollectiveWatch::watched() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return watched_.size();
}

void CollectiveWatch::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    cv_.wait_for(lock, poll_interval_, [this] { return stopping_; });
    if (stopping_) break;
    // Oldest first: a stream finishes its collectives in issue order, so the
    // first one not finished is the one to time.
    const auto now = std::chrono::steady_clock::now();
    for (auto it = watched_.begin(); it != watched_.end();) {
      bool done = false;
      try {
        done = it->done->query();
      } catch (const std::exception& e) {
        // A device's sticky error (an illegal address in any kernel) surfaces
        // in the next call to its runtime, which may be this one: the job ends
        // with its text instead of std::terminate on this thread.
        std::string problem = fmt::format("collective {} on group '{}' failed on the device: {}",
                                          it->collective, it->group, e.what());
        lock.unlock();
        endings_.failed(problem);
        return;
      }
      if (done) {
        it = watched_.erase(it);
        continue;
      }
      if (now >= it->deadline) {
        const Watched late = *it;
        lock.unlock();
        endings_.timed_out(late.collective, late.group, late.timeout);
        return;
      }
      ++it;
    }
    for (const auto& [token, check] : health_checks_) {
      std::string problem = check();
      if (problem.empty()) continue;
      lock.unlock();
      endings_.failed(problem);
      return;
    }
  }
}

}  // namespace tessel::dist
