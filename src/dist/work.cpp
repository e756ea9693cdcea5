#include "dist/work.h"

#include <chrono>
#include <thread>

#include "dist/caller_wait_time.h"

namespace tessel::dist {

void AsyncWork::wait() {
  const CallerWaitTimer timer;
  // Small collectives finish within microseconds: polling briefly (yielding,
  // so the communication thread keeps its core) avoids the wake-up latency
  // of the condition variable; longer waits block.
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
  while (!done_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  if (!done_.load(std::memory_order_acquire)) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return done_.load(std::memory_order_acquire); });
  }
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error = error_;
  }
  if (error) std::rethrow_exception(error);
}

void AsyncWork::mark_done(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::move(error);
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

}  // namespace tessel::dist
