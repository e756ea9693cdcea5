#include "dist/comm_thread.h"

#include <ATen/ATen.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "dist/timeout.h"

namespace tessel::dist {

Progress::Progress(const char* collective, const std::string& group,
                   std::chrono::milliseconds timeout, int world_rank, at::Tensor& scratch)
    : collective_(collective),
      group_(group),
      timeout_(timeout),
      world_rank_(world_rank),
      deadline_(std::chrono::steady_clock::now() + timeout),
      scratch_(scratch) {}

void Progress::wait(MPI_Request& request) {
  using clock = std::chrono::steady_clock;
  // Backoff phases, measured from the start of this wait: MPI_Test in a tight
  // loop first (latency of small collectives), then yield the core between
  // tests (other ranks sharing the core run; with shared-memory transport
  // each MPI_Test also moves data, so a large transfer needs frequent tests),
  // and only when peers are clearly late sleep briefly between tests, so a
  // rank waiting on a slow peer costs almost no CPU.
  constexpr auto kSpin = std::chrono::microseconds(20);
  constexpr auto kYield = std::chrono::milliseconds(500);
  constexpr auto kSleep = std::chrono::microseconds(100);
  const auto start = clock::now();
  for (;;) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    const auto now = clock::now();
    if (now >= deadline_) {
      const std::string message = timeout_message(collective_, group_, timeout_, world_rank_);
      std::fprintf(stderr, "%s\n", message.c_str());
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 1);
      std::_Exit(1);  // MPI_Abort does not return; this is for the linter and odd MPIs
    }
    const auto waited = now - start;
    if (waited < kSpin) continue;
    if (waited < kYield) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(kSleep);
    }
  }
}

void* Progress::scratch(int64_t bytes) {
  if (!scratch_.defined() || scratch_.numel() < bytes) {
    scratch_ = at::Tensor();  // free the old buffer before allocating the larger one
    scratch_ = at::empty({std::max<int64_t>(bytes, 1)}, at::TensorOptions().dtype(at::kByte));
  }
  return scratch_.data_ptr();
}

CommThread& CommThread::instance() {
  static CommThread* thread = new CommThread();
  return *thread;
}

void CommThread::start(int world_rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (running_) return;
  world_rank_ = world_rank;
  stopping_ = false;
  running_ = true;
  thread_ = std::thread([this] { loop(); });
}

bool CommThread::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_ && !stopping_;
}

void CommThread::submit(CommTask task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TESSEL_CHECK(running_ && !stopping_,
                 "collective {} on group '{}' issued after tessel::dist::shutdown(); issue all "
                 "collectives before shutting the communicator down",
                 task.collective, task.group);
    queue_.push_back(std::move(task));
    pending_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_one();
}

void CommThread::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!running_) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  running_ = false;
}

void CommThread::loop() {
  // Collectives move and reduce raw buffers: autograd has no business here
  // (out= reductions refuse tensors that require grad otherwise).
  at::NoGradGuard no_grad;
  at::Tensor scratch;
  for (;;) {
    // Collectives often come back to back (FSDP issues one per layer): poll
    // the queue briefly, yielding, before sleeping, to save the wake-up
    // latency of the condition variable on the next one.
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
    while (pending_.load(std::memory_order_acquire) == 0 &&
           std::chrono::steady_clock::now() < until) {
      sched_yield();
    }
    CommTask task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      pending_.fetch_sub(1, std::memory_order_release);
    }
    Progress progress(task.collective, task.group, task.timeout, world_rank_, scratch);
    std::exception_ptr error;
    try {
      task.body(progress);
    } catch (...) {
      error = std::current_exception();
    }
    task.body = nullptr;  // release the tensors the task kept alive before signalling
    if (task.work) task.work->mark_done(error);
  }
}

}  // namespace tessel::dist
