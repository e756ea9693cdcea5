// Which algorithm the MPI backend uses for its reductions. MPI has no bf16 or
// fp16 reductions, so those always take the local-math path (all-to-all of
// the chunks, then a libtorch reduction); for fp32/fp64/int32/int64 the
// native MPI collective is an alternative. Auto picks what bench/comm.cpp
// measured faster (see docs/bench/comm.md); the environment variables
// TESSEL_ALLREDUCE_ALGO (auto|native|rs_ag) and TESSEL_REDUCE_SCATTER_ALGO
// (auto|native|alltoall) override it, and the benchmark sets it directly.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>

#include "dist/communicator.h"

namespace tessel::dist {

enum class AllReduceAlgorithm { Auto, Native, ReduceScatterAllGather };
enum class ReduceScatterAlgorithm { Auto, Native, AllToAllReduce };

struct Algorithms {
  AllReduceAlgorithm all_reduce = AllReduceAlgorithm::Auto;
  ReduceScatterAlgorithm reduce_scatter = ReduceScatterAlgorithm::Auto;
};

// Process-wide choice; initialized from the environment on first use.
// Throws UsageError for an unknown environment value.
Algorithms algorithms();
void set_algorithms(Algorithms algorithms);

const char* to_string(AllReduceAlgorithm algorithm);
const char* to_string(ReduceScatterAlgorithm algorithm);

// The concrete algorithm (never Auto) for one collective; `native_ok` says
// whether MPI can reduce the dtype and the buffers allow the native call.
AllReduceAlgorithm resolve(AllReduceAlgorithm requested, bool native_ok, int64_t bytes,
                           int group_size);
ReduceScatterAlgorithm resolve(ReduceScatterAlgorithm requested, bool native_ok, int64_t bytes,
                               int group_size);
// Whether an all-reduce whose caller waits at once, with nothing else in
// flight, should be the blocking MPI_Allreduce (for a dtype MPI can reduce).
bool resolve_blocking(AllReduceAlgorithm requested, int64_t bytes, int group_size);

}  // namespace tessel::dist
