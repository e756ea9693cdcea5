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
// A collective whose caller waits at once (the synchronous API) runs as the
// blocking MPI call when the backend has one for it: OpenMPI's blocking
// algorithms are up to twice as fast as its nonblocking ones, and the caller
// has nothing to overlap. When nothing of its lane is queued or running, the
// caller's own thread runs such a collective, blocking call or job
// (try_run_on_caller: no hand-off to the engine and back); otherwise the
// engine does, in lane order. Requests of other jobs still progress inside a
// blocking call (MPI drives all of them).
// MPI does not match a blocking collective with a nonblocking one, so the
// choice rests on the form of the call alone, which SPMD code makes the same
// on every rank (communicator.h). The watchdog bounds blocking calls by the
// same timeout.
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

// The communication thread's nice value: TESSEL_ENGINE_NICE (0-19). The
// default is 10 in a job on one node, where the thread's polling should
// yield to the compute threads it shares cores with, and 0 in a job across
// nodes, where the thread feeds the network links and a delay leaves a link
// idle (docs/bench/cluster.md: faster at nice 0 in every multi-node layout
// and rate measured). Throws a UsageError for any other value.
int engine_nice(bool across_nodes = false);

// Handed to a running job: awaits its MPI requests and lends it scratch.
class Progress {
 public:
  // `co_await p.wait(request)`: resumes when the request completed.
  RequestAwaiter wait(MPI_Request& request) { return RequestAwaiter{&request, &slot_}; }

  // Tests the request the job is suspended on and resumes the job when it
  // completed (it runs to its next suspension or its end); false otherwise.
  bool resume_if_ready();

  // The job will post no more MPI calls: the next collective of the same
  // communicator may start now, while this one's transfers finish. Jobs that
  // never say so let the next one start when they end.
  void done_posting() { posted_all_ = true; }

  // A byte buffer of at least `bytes`, valid until the job ends; buffers are
  // reused across jobs (the engine keeps at most two, a caller's thread one),
  // 64-byte aligned.
  void* scratch(int64_t bytes);

 private:
  friend class ProgressEngine;
  ProgressEngine* engine_ = nullptr;  // null: run by a caller's thread
  std::chrono::steady_clock::time_point deadline_;
  RequestSlot slot_;
  bool posted_all_ = false;
  at::Tensor scratch_;
};

// One communicator's lane: how much of it is outstanding. Shared by the
// communicator, its tasks and the engine.
struct LaneState {
  static constexpr int kCallerHolds = 1 << 30;
  // Tasks of the lane queued or running in the engine, plus kCallerHolds
  // while a caller's thread makes a blocking call of the lane itself.
  std::atomic<int> busy{0};
};

struct CommTask {
  const char* collective = "";
  std::string group;
  std::chrono::milliseconds timeout{0};
  std::shared_ptr<LaneState> lane;  // the communicator: issue order is kept per lane
  // The synchronous API: the caller waits at once. Then `blocking`, when
  // set, runs instead of `body`.
  bool caller_waits = false;
  std::function<void()> blocking;
  std::function<CommJob(Progress&)> body;
  std::shared_ptr<AsyncWork> work;  // null for internal tasks (freeing a communicator)
};

class ProgressEngine {
 public:
  // The process-wide instance. Never destroyed: a process leaving main()
  // without shutdown() must not run the destructor of a thread still waiting.
  static ProgressEngine& instance();

  // `thread_multiple`: MPI accepts calls from several threads at once, so a
  // caller's thread may make a blocking call while the engine runs others.
  // `blocking_calls`: a task's blocking MPI call may run at all; false where
  // ranks outnumber the cores (core_sharing.h): MPI's blocking calls spin,
  // the polled job yields the core between tests.
  // `across_nodes`: the job's ranks run on more than one node (engine_nice).
  void start(int world_rank, bool thread_multiple, bool blocking_calls, bool across_nodes = false);
  bool running() const;
  // Queues a task; throws tessel::Error when the engine is not running.
  void submit(CommTask task);
  // Runs the queued tasks to completion, then joins the thread.
  void stop();

  // For a caller that waits at once: runs the task on the calling thread
  // (its blocking call under the watchdog where blocking calls are allowed,
  // else its job, polled here) when
  // nothing of its lane is queued or running and MPI allows calls from
  // several threads; returns false, having run nothing, otherwise. Rethrows
  // the job's error.
  bool try_run_on_caller(const CommTask& task);

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
  bool thread_multiple_ = false;
  bool blocking_calls_ = true;
  std::thread thread_;

  // The engine thread's own state.
  std::map<const LaneState*, Lane> lanes_;
  int64_t queued_ = 0;  // tasks in lanes_, started or not
  std::vector<at::Tensor> free_scratch_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace tessel::dist
