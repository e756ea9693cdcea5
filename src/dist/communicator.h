// Communicator: the collectives tessel needs, over at::Tensor, for one group
// of ranks. Backends: MPI (CPU tensors, many processes), single-process
// (world 1, no MPI needed); NCCL later for GPU builds.
//
// Conventions (all collectives):
// - Tensors must be contiguous; dtypes fp32, bf16, fp16, int64 (reductions also
//   accept fp64 and int32; any dtype for pure data movement: all-gather,
//   all-to-all, broadcast). all_gather_into may take `in` = rank's slot of
//   `out` (in place); reduce_scatter_from may write `out` inside `in`.
// - Flat buffers: all_gather_into(out, in) writes rank r's `in` at
//   out[r*in.numel() : (r+1)*in.numel()]; reduce_scatter_from(out, in) reduces
//   in[r*out.numel() : ...] from every rank into rank r's `out`. Sizes must be
//   equal across ranks; callers pad (FSDP pads shards, see fsdp/).
// - Reductions are SUM or MAX only; averaging is the caller's explicit division
//   (SPEC 4: SUM plus division, never a backend AVG).
// - Every rank of the group must call the same collectives in the same order,
//   each in the same form: synchronous (all_reduce) or asynchronous
//   (all_reduce_async, even when waited at once). The MPI backend runs the
//   synchronous form as a blocking MPI call, which MPI does not match with a
//   nonblocking one on another rank.
// - A collective that does not finish within timeout() ends the process with a
//   message naming the collective and the group (a dead or hung peer must not
//   hang the others forever).
// - `*_async` variants return a Work handle; the tensors must stay alive and
//   untouched until wait() returns. Collectives of one communicator start in
//   issue order; those of different communicators run concurrently and may
//   complete in any order (wait for one before feeding its output to another).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessel::dist {

enum class ReduceOp { Sum, Max };

enum class CollectiveKind { AllGather, ReduceScatter, AllReduce, AllToAll, Broadcast, Barrier, RingShift };
const char* to_string(CollectiveKind kind);
constexpr int kNumCollectiveKinds = 7;

// How many collectives of each kind this communicator ran, and how many bytes
// each rank sent into them. FSDP tests assert collective counts per step.
//
// sent_same_node / sent_other_node: the bytes this rank's collectives send to
// peers on its own node and on other nodes (node_map.h), as the algorithms
// tessel asks MPI for move them when every rank sends its part directly to
// the ranks that need it (all-gather: its shard to every peer; reduce-scatter
// and all-to-all: chunk j to rank j; all-reduce: a reduce-scatter then an
// all-gather; broadcast: the root to every peer). What crosses a link is
// then these figures plus protocol headers; scripts/cluster reads the links'
// own counters to check them.
struct CollectiveCounters {
  int64_t calls[kNumCollectiveKinds] = {};
  int64_t bytes[kNumCollectiveKinds] = {};
  int64_t sent_same_node[kNumCollectiveKinds] = {};
  int64_t sent_other_node[kNumCollectiveKinds] = {};
  int64_t count(CollectiveKind k) const { return calls[static_cast<int>(k)]; }
};

// Handle of an asynchronous collective.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective finished (or the timeout ended the process).
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

class Communicator;
using CommunicatorPtr = std::shared_ptr<Communicator>;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Human-readable group name used in errors and logs, e.g. "world" or
  // "dp_shard (ranks 0,1,2,3)".
  virtual const std::string& name() const = 0;
  // Global (world) ranks of this group's members, in group-rank order.
  virtual const std::vector<int>& world_ranks() const = 0;

  virtual WorkPtr all_gather_into_async(const at::Tensor& out, const at::Tensor& in) = 0;
  // The all-gather of consecutive segments of `in` (segment i has
  // segment_numels[i] elements), each gathered rank-major into its own region
  // of `out`: out holds, segment after segment, size() x segment_numels[i]
  // elements, rank r's part of segment i at that region's offset +
  // r * segment_numels[i]. With one segment it is all_gather_into. FSDP
  // gathers a group's parameters this way, each straight into its unsharded
  // rows, so no copy follows the transfer. One collective: counted once, as
  // an all-gather of in.nbytes(). `in` must not overlap `out`.
  virtual WorkPtr all_gather_segments_async(const at::Tensor& out, const at::Tensor& in,
                                            const std::vector<int64_t>& segment_numels) = 0;
  // all_gather_into_async whose bytes cross as point-to-point pieces of at
  // most `piece_bytes`, at most `pieces_in_flight` of them posted at once:
  // gathers issued back to back on one group then arrive one after another,
  // in issue order, with the link kept full. Posted all at once, MPI
  // all-gathers share a link fragment by fragment and all arrive together
  // at the end (docs/bench/cluster.md, issue 43). Counted like
  // all_gather_into_async. A backend where order comes free (one process,
  // NCCL's stream order) gathers as all_gather_into_async.
  virtual WorkPtr all_gather_into_in_order_async(const at::Tensor& out, const at::Tensor& in,
                                                 int64_t piece_bytes, int pieces_in_flight) {
    (void)piece_bytes;
    (void)pieces_in_flight;
    return all_gather_into_async(out, in);
  }
  virtual WorkPtr reduce_scatter_from_async(const at::Tensor& out, const at::Tensor& in,
                                            ReduceOp op) = 0;
  // In place: every rank ends with the reduction of all ranks' `tensor`.
  virtual WorkPtr all_reduce_async(const at::Tensor& tensor, ReduceOp op) = 0;
  // Equal splits: rank r's in[j*n/size ...] goes to rank j's out[r*n/size ...].
  virtual WorkPtr all_to_all_async(const at::Tensor& out, const at::Tensor& in) = 0;
  // Variable splits along dim 0 (expert parallelism moves each token row to
  // the rank of its expert): rank r sends in's rows
  // [sum(in_counts[0..j)), + in_counts[j]) to rank j, which receives them at
  // out's rows [sum(out_counts[0..r)), + out_counts[r]). Counts are rows, one
  // per group rank; in_counts[j] on rank r must equal out_counts[r] on rank j
  // (exchange the counts first, e.g. with all_to_all of an int64 tensor).
  // out and in have the same row shape (sizes past dim 0) and dtype.
  virtual WorkPtr all_to_all_v_async(const at::Tensor& out, const std::vector<int64_t>& out_counts,
                                     const at::Tensor& in, const std::vector<int64_t>& in_counts) = 0;
  // In place: every rank ends with root's `tensor` (root is a group rank).
  virtual WorkPtr broadcast_async(const at::Tensor& tensor, int root) = 0;
  virtual WorkPtr barrier_async() = 0;
  // The ring step of context parallelism: every rank sends `in` to the next
  // group rank ((r + 1) % size) and receives the previous rank's `in` into
  // `out`. Same shape and dtype on every rank, any dtype; out and in must
  // not overlap. With one rank `out` becomes a copy of `in`.
  virtual WorkPtr ring_shift_async(const at::Tensor& out, const at::Tensor& in) = 0;

  // The synchronous forms: the caller waits at once. A backend may take a
  // faster path for them than for the asynchronous ones (the MPI backend runs
  // the blocking MPI call when nothing else is in flight).
  virtual void all_gather_into(const at::Tensor& out, const at::Tensor& in) {
    all_gather_into_async(out, in)->wait();
  }
  virtual void reduce_scatter_from(const at::Tensor& out, const at::Tensor& in,
                                   ReduceOp op = ReduceOp::Sum) {
    reduce_scatter_from_async(out, in, op)->wait();
  }
  virtual void all_reduce(const at::Tensor& tensor, ReduceOp op = ReduceOp::Sum) {
    all_reduce_async(tensor, op)->wait();
  }
  virtual void all_to_all(const at::Tensor& out, const at::Tensor& in) {
    all_to_all_async(out, in)->wait();
  }
  virtual void all_to_all_v(const at::Tensor& out, const std::vector<int64_t>& out_counts, const at::Tensor& in,
                            const std::vector<int64_t>& in_counts) {
    all_to_all_v_async(out, out_counts, in, in_counts)->wait();
  }
  virtual void broadcast(const at::Tensor& tensor, int root) { broadcast_async(tensor, root)->wait(); }
  virtual void barrier() { barrier_async()->wait(); }

  // Sub-communicator: collective over all ranks of this group. Ranks passing
  // the same color form one group, ordered by key. `name` names the group in
  // messages (the backend appends the member ranks).
  virtual CommunicatorPtr split(int color, int key, const std::string& name) = 0;

  virtual std::chrono::milliseconds timeout() const = 0;
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;

  virtual CollectiveCounters counters() const = 0;
  virtual void reset_counters() = 0;
};

// The world communicator of this process. With an MPI launcher (mpirun sets
// OMPI_COMM_WORLD_SIZE / PMI_SIZE) and world size > 1 it is the MPI backend;
// otherwise the single-process backend. Created on first use; later calls
// return the same object. Default timeout: TESSEL_COLLECTIVE_TIMEOUT_S or 300 s.
CommunicatorPtr world();

// Finalizes the backend (MPI_Finalize) at normal exit. Safe to call twice.
void shutdown();

// " on rank R of N" when this process is one rank of a started multi-rank
// world, else "": for error messages, so a job's output says which rank failed.
std::string rank_label();

// The end of a program whose rank failed (an exception escaped). Alone, a
// normal shutdown() that returns `exit_code`. As one rank of several, the
// whole job is ended at once (MPI_Abort with `exit_code`; does not return):
// the other ranks may be waiting for this one inside a collective and would
// otherwise wait out the collective timeout, and MPI_Finalize itself would
// wait for them. Print the error first.
int end_job_after_error(int exit_code);

}  // namespace tessel::dist
