#include "dist/algorithms.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace tessel::dist {
namespace {

AllReduceAlgorithm parse_all_reduce(const char* env) {
  if (env == nullptr || std::string(env).empty() || std::string(env) == "auto") {
    return AllReduceAlgorithm::Auto;
  }
  if (std::string(env) == "native") return AllReduceAlgorithm::Native;
  if (std::string(env) == "rs_ag") return AllReduceAlgorithm::ReduceScatterAllGather;
  throw UsageError(fmt::format("TESSEL_ALLREDUCE_ALGO='{}' is unknown; use auto, native or rs_ag",
                               env));
}

ReduceScatterAlgorithm parse_reduce_scatter(const char* env) {
  if (env == nullptr || std::string(env).empty() || std::string(env) == "auto") {
    return ReduceScatterAlgorithm::Auto;
  }
  if (std::string(env) == "native") return ReduceScatterAlgorithm::Native;
  if (std::string(env) == "alltoall") return ReduceScatterAlgorithm::AllToAllReduce;
  throw UsageError(fmt::format(
      "TESSEL_REDUCE_SCATTER_ALGO='{}' is unknown; use auto, native or alltoall", env));
}

struct State {
  std::atomic<int> all_reduce;
  std::atomic<int> reduce_scatter;
};

State& state() {
  static State s{{static_cast<int>(parse_all_reduce(std::getenv("TESSEL_ALLREDUCE_ALGO")))},
                 {static_cast<int>(
                     parse_reduce_scatter(std::getenv("TESSEL_REDUCE_SCATTER_ALGO")))}};
  return s;
}

}  // namespace

Algorithms algorithms() {
  return {static_cast<AllReduceAlgorithm>(state().all_reduce.load()),
          static_cast<ReduceScatterAlgorithm>(state().reduce_scatter.load())};
}

void set_algorithms(Algorithms algorithms) {
  state().all_reduce.store(static_cast<int>(algorithms.all_reduce));
  state().reduce_scatter.store(static_cast<int>(algorithms.reduce_scatter));
}

const char* to_string(AllReduceAlgorithm algorithm) {
  switch (algorithm) {
    case AllReduceAlgorithm::Auto: return "auto";
    case AllReduceAlgorithm::Native: return "native";
    case AllReduceAlgorithm::ReduceScatterAllGather: return "rs_ag";
  }
  return "?";
}

const char* to_string(ReduceScatterAlgorithm algorithm) {
  switch (algorithm) {
    case ReduceScatterAlgorithm::Auto: return "auto";
    case ReduceScatterAlgorithm::Native: return "native";
    case ReduceScatterAlgorithm::AllToAllReduce: return "alltoall";
  }
  return "?";
}

AllReduceAlgorithm resolve(AllReduceAlgorithm requested, bool native_ok, int64_t bytes,
                           int group_size) {
  if (!native_ok) return AllReduceAlgorithm::ReduceScatterAllGather;
  if (requested != AllReduceAlgorithm::Auto) return requested;
  // Measured (docs/bench/comm.md), with libnbc's reduce-scatter + all-gather
  // schedule (nonblocking_all_reduce_choice.h): up to 16 MiB one
  // MPI_Iallreduce is as fast as our two collectives at 2 ranks (sharing a
  // core, so that the call is polled) and 1.3-1.6x faster at 4; at 64 MiB
  // ours (the pipelined all-to-all reduction) wins 1.2-1.5x. (With libnbc's
  // own choice, a root's reduce and broadcast, ours won 1.7-3x from 1 MiB.)
  (void)group_size;
  return bytes > (int64_t{16} << 20) ? AllReduceAlgorithm::ReduceScatterAllGather
                                     : AllReduceAlgorithm::Native;
}

bool resolve_blocking(AllReduceAlgorithm requested, int64_t bytes, int group_size) {
  if (requested != AllReduceAlgorithm::Auto) return requested == AllReduceAlgorithm::Native;
  // Measured (docs/bench/comm.md): the blocking MPI_Allreduce is about twice
  // as fast as the polled MPI_Iallreduce up to 16 MiB (libnbc's own schedule
  // then, before nonblocking_all_reduce_choice.h) and beats the
  // reduce-scatter + all-gather there; at 64 MiB the latter wins 1.4-1.7x.
  (void)group_size;
  return bytes <= (int64_t{16} << 20);
}

ReduceScatterAlgorithm resolve(ReduceScatterAlgorithm requested, bool native_ok, int64_t bytes,
                               int group_size) {
  if (!native_ok) return ReduceScatterAlgorithm::AllToAllReduce;
  if (requested != ReduceScatterAlgorithm::Auto) return requested;
  // Measured (docs/bench/comm.md): all-to-all + local sum beats
  // MPI_Ireduce_scatter_block 2-6x from 16 MiB up, at 2 and 4 ranks.
  (void)bytes;
  (void)group_size;
  return ReduceScatterAlgorithm::AllToAllReduce;
}

}  // namespace tessel::dist
