// Work handles: CompletedWork for collectives that finished before the call
// returned (single-process backend), AsyncWork for collectives the
// communication thread finishes later (MPI backend).
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>

#include "dist/communicator.h"

namespace tessel::dist {

class CompletedWork : public Work {
 public:
  void wait() override {}
  bool is_completed() override { return true; }
};

class AsyncWork : public Work {
 public:
  // Blocks until mark_done(); rethrows the error the collective ended with.
  void wait() override;
  bool is_completed() override { return done_.load(std::memory_order_acquire); }
  // Called once by the thread that ran the collective.
  void mark_done(std::exception_ptr error = nullptr);

 private:
  std::atomic<bool> done_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::exception_ptr error_;
};

}  // namespace tessel::dist
