#include "dist/progress_engine.h"

#include <ATen/ATen.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"
#include "dist/watchdog.h"

namespace tessel::dist {

namespace {

// How a thread waits between tests of outstanding requests, by how long
// nothing happened: MPI_Test in a tight loop first (latency of small
// collectives), then yield the core between tests (other ranks sharing the
// core run; with shared-memory transport each MPI_Test also moves data, so a
// large transfer needs frequent tests), and only when peers are clearly late
// sleep briefly between tests, so a rank waiting on a slow peer costs almost
// no CPU.
void back_off(std::chrono::steady_clock::duration quiet) {
  constexpr auto kSpin = std::chrono::microseconds(20);
  constexpr auto kYield = std::chrono::milliseconds(500);
  constexpr auto kSleep = std::chrono::microseconds(100);
  if (quiet < kSpin) return;
  if (quiet < kYield) {
    sched_yield();
  } else {
    std::this_thread::sleep_for(kSleep);
  }
}

}  // namespace

// The engine thread runs at a lower priority than the compute thread (nice
// 10, or TESSEL_ENGINE_NICE): where ranks share cores, its polling otherwise
// takes CPU from the matrix products it is meant to hide behind. It still
// gets a core whenever the compute thread waits, and a core of its own where
// there are spare ones. Measured (docs/bench/vs_pytorch.md): FSDP over 2
// ranks on 2 cores, 1.37-1.62 s/step at nice 10 against 1.53-2.35 s at 0.
int engine_nice(bool across_nodes) {
  const char* env = std::getenv("TESSEL_ENGINE_NICE");
  if (env == nullptr || *env == '\0') return across_nodes ? 0 : 10;
  char* end = nullptr;
  const long value = std::strtol(env, &end, 10);
  if (end == env || *end != '\0' || value < 0 || value > 19) {
    throw UsageError(fmt::format(
        "TESSEL_ENGINE_NICE='{}' is not a nice value from 0 to 19; unset it for the default (10 on one node, 0 "
        "across nodes)",
        env));
  }
  return static_cast<int>(value);
}

namespace {

// Scratch of jobs a caller's thread runs itself (try_run_on_caller): one
// buffer per thread, kept for the next call.
thread_local at::Tensor caller_scratch;

}  // namespace

struct ProgressEngine::Active {
  CommTask task;  // keeps the body (and so the job's captures) at a fixed address
  Progress progress;
  CommJob job;
  bool started = false;
};

bool Progress::resume_if_ready() {
  if (slot_.request == nullptr) return false;
  int done = 0;
  MPI_Test(slot_.request, &done, MPI_STATUS_IGNORE);
  if (!done) return false;
  const std::coroutine_handle<> waiting = slot_.waiting;
  slot_ = RequestSlot{};
  waiting.resume();
  return true;
}

void* Progress::scratch(int64_t bytes) {
  if (engine_ == nullptr) {  // run by a caller's thread
    if (!caller_scratch.defined() || caller_scratch.numel() < bytes) {
      caller_scratch = at::Tensor();  // free the old buffer before allocating the larger one
      caller_scratch = at::empty({std::max<int64_t>(bytes, 1)}, at::TensorOptions().dtype(at::kByte));
    }
    return caller_scratch.data_ptr();
  }
  if (!scratch_.defined() || scratch_.numel() < bytes) {
    if (scratch_.defined()) engine_->return_scratch(std::move(scratch_));
    scratch_ = engine_->take_scratch(bytes);
  }
  return scratch_.data_ptr();
}

ProgressEngine& ProgressEngine::instance() {
  static ProgressEngine* engine = new ProgressEngine();
  return *engine;
}

void ProgressEngine::start(int world_rank, bool thread_multiple, bool blocking_calls, bool across_nodes) {
  const int nice = engine_nice(across_nodes);  // a bad value throws here, on the caller's thread
  std::lock_guard<std::mutex> lock(mutex_);
  if (running_) return;
  world_rank_ = world_rank;
  thread_multiple_ = thread_multiple;
  blocking_calls_ = blocking_calls;
  stopping_ = false;
  running_ = true;
  watchdog_ = std::make_unique<Watchdog>(world_rank);
  thread_ = std::thread([this, nice] {
    // Named for top -H, perf and bench/fsdp_cpu.py, which tell it from the compute thread by it.
    pthread_setname_np(pthread_self(), "tessel-comm");
    // Linux applies a nice value per thread (its tid).
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice);
    loop();
  });
}

bool ProgressEngine::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_ && !stopping_;
}

void ProgressEngine::submit(CommTask task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    TESSEL_CHECK(running_ && !stopping_,
                 "collective {} on group '{}' issued after tessel::dist::shutdown(); issue all "
                 "collectives before shutting the communicator down",
                 task.collective, task.group);
    task.lane->busy.fetch_add(1);
    incoming_.push_back(std::move(task));
    pending_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_one();
}

bool ProgressEngine::try_run_on_caller(const CommTask& task) {
  if (!thread_multiple_) return false;
  LaneState& lane = *task.lane;
  int idle = 0;
  if (!lane.busy.compare_exchange_strong(idle, LaneState::kCallerHolds)) return false;
  // Tasks of the lane submitted meanwhile wait in the engine until this returns.
  struct Release {
    LaneState& lane;
    ~Release() { lane.busy.fetch_sub(LaneState::kCallerHolds); }
  } release{lane};
  if (task.blocking && blocking_calls_) {
    WatchdogArmed armed(*watchdog_, task.collective, task.group, task.timeout);
    task.blocking();
    return true;
  }
  // The job on this thread: test its request, resume it, until it ends.
  at::NoGradGuard no_grad;
  using clock = std::chrono::steady_clock;
  Progress progress;
  progress.deadline_ = clock::now() + task.timeout;
  CommJob job = task.body(progress);
  job.start();
  auto last_event = clock::now();
  while (!job.done()) {
    const bool resumed = progress.resume_if_ready();
    const auto now = clock::now();
    if (resumed) {
      last_event = now;
      continue;
    }
    if (now >= progress.deadline_) {
      abort_job_on_timeout(task.collective, task.group, task.timeout, world_rank_);
    }
    back_off(now - last_event);
  }
  if (job.error()) std::rethrow_exception(job.error());
  return true;
}

void ProgressEngine::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!running_) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  watchdog_.reset();
  free_scratch_.clear();
  running_ = false;
}

bool ProgressEngine::admit() {
  if (pending_.load(std::memory_order_acquire) == 0) return false;
  std::deque<CommTask> arrived;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    arrived.swap(incoming_);
    pending_.store(0, std::memory_order_release);
  }
  for (CommTask& task : arrived) {
    auto active = std::make_unique<Active>();
    active->task = std::move(task);
    lanes_[active->task.lane.get()].push_back(std::move(active));
    ++queued_;
  }
  return !arrived.empty();
}

void ProgressEngine::start_task(Active& a) {
  a.started = true;
  a.progress.engine_ = this;
  a.progress.deadline_ = std::chrono::steady_clock::now() + a.task.timeout;
  try {
    if (a.task.caller_waits && a.task.blocking && blocking_calls_) {
      WatchdogArmed armed(*watchdog_, a.task.collective, a.task.group, a.task.timeout);
      a.task.blocking();
      return;  // no job: finished
    }
    a.job = a.task.body(a.progress);
    a.job.start();
  } catch (...) {
    // The blocking call, or the body before it became a coroutine, threw:
    // report it like an error inside the job.
    a.job = CommJob();
    if (a.task.work) a.task.work->mark_done(std::current_exception());
    a.task.work = nullptr;
  }
}

void ProgressEngine::finish_task(Active& a) {
  const std::exception_ptr error = a.job.valid() ? a.job.error() : nullptr;
  if (a.progress.scratch_.defined()) return_scratch(std::move(a.progress.scratch_));
  a.job = CommJob();  // destroy the coroutine frame (it may hold tensors) ...
  a.task.body = nullptr;  // ... and the captures, before the caller is told
  a.task.blocking = nullptr;
  if (a.task.work) a.task.work->mark_done(error);
  a.task.lane->busy.fetch_sub(1);
  --queued_;
}

bool ProgressEngine::advance(Lane& lane) {
  bool progressed = false;
  bool earlier_posted_all = true;
  for (auto it = lane.begin(); it != lane.end();) {
    Active& a = **it;
    if (!a.started) {
      if (!earlier_posted_all) break;  // issue order within the lane
      // A caller's thread is in a blocking call of this lane: MPI forbids two
      // threads in collectives of one communicator at once.
      if (a.task.lane->busy.load() & LaneState::kCallerHolds) break;
      start_task(a);
      progressed = true;
    } else if (a.progress.resume_if_ready()) {
      progressed = true;
    }
    if (!a.job.valid() || a.job.done()) {
      finish_task(a);
      it = lane.erase(it);
      continue;
    }
    earlier_posted_all = earlier_posted_all && a.progress.posted_all_;
    ++it;
  }
  return progressed;
}

void ProgressEngine::check_deadlines(std::chrono::steady_clock::time_point now) {
  for (auto& [id, lane] : lanes_) {
    for (auto& active : lane) {
      if (!active->started) break;
      if (now >= active->progress.deadline_) {
        abort_job_on_timeout(active->task.collective, active->task.group, active->task.timeout,
                             world_rank_);
      }
    }
  }
}

at::Tensor ProgressEngine::take_scratch(int64_t bytes) {
  // The smallest kept buffer that is large enough; else a new one.
  auto best = free_scratch_.end();
  for (auto it = free_scratch_.begin(); it != free_scratch_.end(); ++it) {
    if (it->numel() >= bytes && (best == free_scratch_.end() || it->numel() < best->numel())) {
      best = it;
    }
  }
  if (best != free_scratch_.end()) {
    at::Tensor buffer = std::move(*best);
    free_scratch_.erase(best);
    return buffer;
  }
  return at::empty({std::max<int64_t>(bytes, 1)}, at::TensorOptions().dtype(at::kByte));
}

void ProgressEngine::return_scratch(at::Tensor buffer) {
  // Keep the two largest: usually one reduction runs at a time, sometimes two.
  free_scratch_.push_back(std::move(buffer));
  std::sort(free_scratch_.begin(), free_scratch_.end(),
            [](const at::Tensor& a, const at::Tensor& b) { return a.numel() > b.numel(); });
  if (free_scratch_.size() > 2) free_scratch_.resize(2);
}

void ProgressEngine::loop() {
  // Collectives move and reduce raw buffers: autograd has no business here
  // (out= reductions refuse tensors that require grad otherwise).
  at::NoGradGuard no_grad;
  using clock = std::chrono::steady_clock;
  // With nothing queued, poll for new work this long (yielding) before
  // sleeping on the condition variable: collectives often come back to back.
  constexpr auto kIdlePoll = std::chrono::microseconds(100);
  auto last_event = clock::now();
  for (;;) {
    bool progressed = admit();
    if (queued_ == 0) {
      const auto until = clock::now() + kIdlePoll;
      while (pending_.load(std::memory_order_acquire) == 0 && clock::now() < until) sched_yield();
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return !incoming_.empty() || stopping_; });
      if (incoming_.empty()) return;  // stopping and drained
      lock.unlock();
      last_event = clock::now();
      continue;
    }
    for (auto it = lanes_.begin(); it != lanes_.end();) {
      progressed = advance(it->second) || progressed;
      it = it->second.empty() ? lanes_.erase(it) : std::next(it);
    }
    const auto now = clock::now();
    if (progressed) {
      last_event = now;
      continue;
    }
    check_deadlines(now);
    back_off(now - last_event);  // measured from the last event: a start or a completed request
  }
}

}  // namespace tessel::dist
