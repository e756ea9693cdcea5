// The progress engine: one thread per process that drives every MPI
// collective of every communicator, many at once.
//
// Each communicator is a lane. Collectives of one lane start in issue order,
// and a collective starts only when every earlier one of its lane has posted
// all its MPI calls: MPI matches collectives on a communicator by the order
// they are posted, and a multi-step job (the pipelined reduction posts block
// after block) must not interleave its posts with a later job differently on
// different ranks. Across lanes nothing waits: a tensor-parallel all-reduce
// runs next to an FSDP all-gather and an HSDP all-reduce, and a peer that is
// late on one group does not hold up another group.
//
// The thread tests the requests of every job in flight (MPI_Test drives
// OpenMPI's progress for all of them) and resumes each job whose request
// completed (comm_job.h). Idle polling backs off: spin, then yield the core,
// then short sleeps once peers are clearly late, so ranks oversubscribing a
// small machine do not starve each other. A job past its collective timeout
// ends the whole job with a message naming the collective and the group.
//
// When a caller waits for a collective at once (the synchronous API), the job
// may run the blocking MPI call instead (Progress::may_block): OpenMPI's
// blocking algorithms are up to twice as fast as its nonblocking ones, and
// the caller has nothing to overlap. Requests of other jobs still progress
// inside the blocking call (MPI drives all of them); jobs of other lanes
// start or post their next step when it returns. MPI does not match a
// blocking collective with a nonblocking one, so the choice rests on the form
// of the call alone, which SPMD code makes the same on every rank (see
// communicator.h). The watchdog bounds the blocking call by the same timeout.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/comm_job.h"
#include "dist/work.h"

namespace tessel::dist {

class ProgressEngine;
class Watchdog;

// Handed to a running job: awaits its MPI requests, lends it scratch, and
// says whether it may block.
class Progress {
 public:
  // `co_await p.wait(request)`: resumes when the request completed.
  RequestAwaiter wait(MPI_Request& request) { return RequestAwaiter{&request, &slot_}; }

  // The job will post no more MPI calls: the next collective of the same
  // communicator may start now, while this one's transfers finish. Jobs that
  // never say so let the next one start when they end.
  void done_posting() { posted_all_ = true; }

  // True when the caller waits for this collective at once (the synchronous
  // form, on every rank of the group): the blocking MPI call is then the
  // fastest path.
  bool may_block() const { return may_block_; }
  // Runs `call` (a blocking MPI call) under the watchdog's timeout.
  void blocking(const std::function<void()>& call);

  // A byte buffer of at least `bytes`, valid until the job ends; buffers are
  // reused across jobs (at most two kept), 64-byte aligned.
  void* scratch(int64_t bytes);

 private:
  friend class ProgressEngine;
  ProgressEngine* engine_ = nullptr;
  const char* collective_ = "";
  const std::string* group_ = nullptr;
  std::chrono::milliseconds timeout_{0};
  std::chrono::steady_clock::time_point deadline_;
  RequestSlot slot_;
  bool posted_all_ = false;
  bool may_block_ = false;
  at::Tensor scratch_;
};

struct CommTask {
  const char* collective = "";
  std::string group;
  std::chrono::milliseconds timeout{0};
  uint64_t lane = 0;         // the communicator: issue order is kept per lane
  bool caller_waits = false;  // the synchronous API: the caller waits at once
  std::function<CommJob(Progress&)> body;
  std::shared_ptr<AsyncWork> work;  // null for internal tasks (freeing a communicator)
};

class ProgressEngine {
 public:
  // The process-wide instance. Never destroyed: a process leaving main()
  // without shutdown() must not run the destructor of a thread still waiting.
  static ProgressEngine& instance();

  // A fresh lane id for a new communicator.
  static uint64_t new_lane();

  void start(int world_rank);
  bool running() const;
  // Queues a task; throws tessel::Error when the engine is not running.
  void submit(CommTask task);
  // Runs the queued tasks to completion, then joins the thread.
  void stop();

 private:
  friend class Progress;
  struct Active;
  using Lane = std::deque<std::unique_ptr<Active>>;

  ProgressEngine() = default;
  void loop();
  bool admit();                      // moves submitted tasks into their lanes
  bool advance(Lane& lane);          // starts, resumes and retires the tasks of one lane
  void start_task(Active& active);
  void finish_task(Active& active);
  void check_deadlines(std::chrono::steady_clock::time_point now);
  at::Tensor take_scratch(int64_t bytes);
  void return_scratch(at::Tensor buffer);

  // Shared with submitting threads.
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<CommTask> incoming_;
  std::atomic<int> pending_{0};  // incoming_.size(), readable without the mutex
  bool running_ = false;
  bool stopping_ = false;
  int world_rank_ = 0;
  std::thread thread_;

  // The engine thread's own state.
  std::map<uint64_t, Lane> lanes_;
  int64_t queued_ = 0;  // tasks in lanes_, started or not
  std::vector<at::Tensor> free_scratch_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace tessel::dist
