// CommJob: the body of one collective as a C++20 coroutine. A job posts
// nonblocking MPI calls and suspends at `co_await progress.wait(request)`;
// the progress engine (progress_engine.h) tests the request among all the
// others in flight and resumes the job when it completed. That is what lets
// one engine thread drive many collectives at once (a tensor-parallel
// all-reduce next to an FSDP all-gather next to an HSDP all-reduce) while the
// bodies still read as straight-line code.
//
// A job may `co_await` another CommJob (a helper such as the pipelined
// reduction): the child runs at once and the parent continues when it ends;
// an exception in the child is rethrown in the parent. The request a job is
// suspended on, and which coroutine to resume, are recorded in the task's
// RequestSlot, so the engine never needs to know how deeply jobs nest.
//
// Lifetime: a coroutine made from a lambda refers to the lambda's captures,
// so the engine keeps the lambda at a fixed address until the job ends.
#pragma once

#include "dist/mpi_c.h"

#include <coroutine>
#include <exception>
#include <utility>

namespace tessel::dist {

// Where a suspended job says what it waits for.
struct RequestSlot {
  MPI_Request* request = nullptr;     // null: not suspended on a request
  std::coroutine_handle<> waiting{};  // the innermost suspended coroutine
};

class CommJob {
 public:
  struct promise_type {
    std::coroutine_handle<> continuation{};  // the parent awaiting this job, if any
    std::exception_ptr error;

    CommJob get_return_object() {
      return CommJob(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    // Created suspended: the engine decides when a job may post its first call.
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct FinalAwaiter {
      bool await_ready() noexcept { return false; }
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        const auto next = h.promise().continuation;
        return next ? next : std::noop_coroutine();
      }
      void await_resume() noexcept {}
    };
    FinalAwaiter final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { error = std::current_exception(); }
  };
  using Handle = std::coroutine_handle<promise_type>;

  CommJob() = default;
  explicit CommJob(Handle handle) : handle_(handle) {}
  CommJob(CommJob&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  CommJob& operator=(CommJob&& other) noexcept {
    if (this != &other) {
      destroy();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  CommJob(const CommJob&) = delete;
  CommJob& operator=(const CommJob&) = delete;
  ~CommJob() { destroy(); }

  bool valid() const { return static_cast<bool>(handle_); }
  bool done() const { return handle_.done(); }
  // Runs a job that has not started yet until it first suspends or ends.
  void start() { handle_.resume(); }
  // The exception the job ended with (null when it ended normally).
  std::exception_ptr error() const { return handle_.promise().error; }

  // Awaiting a child job: it runs now, on this thread, and the parent resumes
  // when it ends.
  struct ChildAwaiter {
    Handle child;
    bool await_ready() noexcept { return false; }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> parent) noexcept {
      child.promise().continuation = parent;
      return child;
    }
    void await_resume() {
      if (child.promise().error) std::rethrow_exception(child.promise().error);
    }
  };
  ChildAwaiter operator co_await() && noexcept { return ChildAwaiter{handle_}; }

 private:
  void destroy() {
    if (handle_) handle_.destroy();
    handle_ = {};
  }
  Handle handle_;
};

// `co_await` on a request: completes without suspending when MPI_Test finds
// it done already (small collectives often are), else suspends the job and
// records the request in the task's slot for the engine to test.
struct RequestAwaiter {
  MPI_Request* request;
  RequestSlot* slot;
  bool await_ready() {
    int done = 0;
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
    return done != 0;
  }
  void await_suspend(std::coroutine_handle<> waiting) noexcept {
    slot->request = request;
    slot->waiting = waiting;
  }
  void await_resume() noexcept {}
};

}  // namespace tessel::dist
