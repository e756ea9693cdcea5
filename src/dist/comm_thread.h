// The communication thread of a process: one FIFO queue shared by every MPI
// communicator of the process. Collectives run one after another in issue
// order, so every rank posts them to MPI in the same order (which MPI
// requires) and the caller's thread is free to compute meanwhile.
//
// Each queued task drives nonblocking MPI calls through Progress::wait, which
// polls MPI_Test with a gentle backoff (spin, then yield, then short sleeps:
// ranks oversubscribing a small machine must not starve each other) and ends
// the job with a clear message when the collective exceeds its timeout.
#pragma once

#include "dist/mpi_c.h"

#include <ATen/core/Tensor.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dist/work.h"

namespace tessel::dist {

// Handed to a running task: waits for its MPI requests and lends it scratch.
class Progress {
 public:
  Progress(const char* collective, const std::string& group, std::chrono::milliseconds timeout,
           int world_rank, at::Tensor& scratch);

  // Returns when `request` completed. Past the deadline (timeout after the
  // task started) prints timeout_message() and calls MPI_Abort on the world.
  void wait(MPI_Request& request);

  // A byte buffer of at least `bytes`, reused across tasks (grown on demand),
  // valid until the task ends. 64-byte aligned (libtorch's CPU allocator).
  void* scratch(int64_t bytes);

 private:
  const char* collective_;
  const std::string& group_;
  std::chrono::milliseconds timeout_;
  int world_rank_;
  std::chrono::steady_clock::time_point deadline_;
  at::Tensor& scratch_;
};

struct CommTask {
  const char* collective = "";
  std::string group;
  std::chrono::milliseconds timeout{0};
  std::function<void(Progress&)> body;
  std::shared_ptr<AsyncWork> work;  // null for internal tasks (freeing a communicator)
};

class CommThread {
 public:
  // The process-wide instance. Never destroyed: a process leaving main()
  // without shutdown() must not run the destructor of a thread still waiting.
  static CommThread& instance();

  void start(int world_rank);
  bool running() const;
  // Queues a task; throws tessel::Error when the thread is not running.
  void submit(CommTask task);
  // Runs the queued tasks to completion, then joins the thread.
  void stop();

 private:
  CommThread() = default;
  void loop();

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<CommTask> queue_;
  std::atomic<int> pending_{0};  // queue_.size(), readable without the mutex
  std::thread thread_;
  bool running_ = false;
  bool stopping_ = false;
  int world_rank_ = 0;
};

}  // namespace tessel::dist
