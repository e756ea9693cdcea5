// A small MPI program for fault_test.cpp: one rank misbehaves during an
// all-reduce on a named group, the others must not wait forever.
//   dist_fault_peer hang  - rank 1 sleeps instead of joining the collective
//   dist_fault_peer hang_async - the same, the others using the asynchronous
//                          call (the engine's polling path, not the blocking one)
//   dist_fault_peer kill  - rank 1 dies (SIGKILL) instead of joining
//   dist_fault_peer throw - rank 1 throws between two all-reduces, ending as
//                          the tessel program does (dist::end_job_after_error)
//   dist_fault_peer ok    - everyone joins (the harness's control case)
// Exits 0 only when the all-reduce completed on this rank with the right sum.
#include <ATen/ATen.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "dist/communicator.h"

namespace {

int run(const char* mode) {
  auto world = tessel::dist::world();
  auto group = world->split(0, world->rank(), "hang_group");
  const bool bad_rank = world->rank() == 1;
  const bool async = std::strcmp(mode, "hang_async") == 0;
  if (bad_rank && (std::strcmp(mode, "hang") == 0 || async)) {
    std::this_thread::sleep_for(std::chrono::seconds(120));
    return 3;
  }
  if (bad_rank && std::strcmp(mode, "kill") == 0) {
    std::raise(SIGKILL);
  }
  if (std::strcmp(mode, "throw") == 0) {
    at::Tensor first = at::ones({10});
    group->all_reduce(first);  // the sequence has begun on every rank
    if (bad_rank) throw tessel::Error("fault_peer: rank 1 failed between two collectives");
  }
  at::Tensor t = at::ones({1000});
  if (async) {
    group->all_reduce_async(t, tessel::dist::ReduceOp::Sum)->wait();
  } else {
    group->all_reduce(t);  // waits at once: the engine may run the blocking MPI call
  }
  const bool right = t.eq(static_cast<float>(world->size())).all().item<bool>();
  std::fprintf(stderr, "fault_peer rank %d: all_reduce finished (%s)\n", world->rank(),
               right ? "correct" : "WRONG");
  tessel::dist::shutdown();
  return right ? 0 : 4;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc > 1 ? argv[1] : "ok");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fault_peer: error%s: %s\n", tessel::dist::rank_label().c_str(), e.what());
    return tessel::dist::end_job_after_error(5);
  }
}
