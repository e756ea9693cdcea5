#include "dist/mpi_communicator.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "core/error.h"
#include "dist/algorithms.h"
#include "dist/caller_wait_time.h"
#include "dist/mpi_types.h"
#include "dist/validation.h"

namespace tessel::dist {
namespace {

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX; }

// out = own (op) every row of `peers` ([group - 1, n]). `out` may be `own`
// itself (an in-place all-reduce); each element is reduced by one rank only
// (its owner), so the order of the operands cannot make ranks disagree.
void reduce_into(const at::Tensor& out, const at::Tensor& own, const at::Tensor& peers, ReduceOp op) {
  at::Tensor result = out;  // the out= API takes a non-const reference
  if (peers.size(0) == 0) {
    if (out.data_ptr() != own.data_ptr()) result.copy_(own);
    return;
  }
  // Two or more peers: their rows reduced first, in one pass, into a
  // temporary (in bfloat16 / float16 a sum then rounds twice, not once).
  const int64_t dim = 0;
  const at::Tensor others = peers.size(0) == 1 ? peers[0]
                            : op == ReduceOp::Sum
                                ? at::sum(peers, at::IntArrayRef(&dim, 1), false, out.scalar_type())
                                : at::amax(peers, at::IntArrayRef(&dim, 1), false);
  if (op == ReduceOp::Sum) {
    at::add_out(result, own, others);
  } else {
    at::maximum_out(result, own, others);
  }
}

at::Tensor scratch_view(void* data, int64_t rows, int64_t cols, at::ScalarType dtype) {
  return at::from_blob(data, {rows, cols}, at::TensorOptions().dtype(dtype));
}

// Scratch the reductions receive into, at most (two blocks in flight).
constexpr int64_t kReduceScratchBytes = int64_t{16} << 20;

// The reduction half of reduce-scatter and all-reduce: region r of `in`
// (offsets[r], lengths[r] elements) goes to rank r, and this rank reduces
// the regions every other rank sends it with its own region of `in` into
// `out` (out.numel() == lengths[me]; the region this rank owns is the same
// length on every rank, as MPI requires the counts to pair up). Its own
// region is read where it lies, never sent to itself: a self-send is a
// copy of a group-th of the data through the scratch. The regions move in
// column blocks, each an MPI_Ialltoallv into one half of a bounded scratch,
// the next block in flight while the previous one is reduced: memory stays
// at kReduceScratchBytes whatever the size, and the arithmetic overlaps the
// transfer. `out` may be this rank's own region of `in` (in place); it must
// not overlap the other regions.
// `last` says the caller posts nothing after it (done_posting at the last block).
CommJob pipelined_reduce(Progress& p, MPI_Comm comm, int me, const MpiMoveType& mt, const at::Tensor& in,
                         const std::vector<int64_t>& offsets, const std::vector<int64_t>& lengths,
                         const at::Tensor& out, ReduceOp op, bool last) {
  const int group_size = static_cast<int>(offsets.size());
  const int peers = group_size - 1;
  const int64_t mine = out.numel();
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  if (longest == 0) co_return;
  const auto esize = static_cast<int64_t>(in.element_size());
  const int scratch_rows = std::max(peers, 1);  // a single rank receives nothing but still takes a scratch
  const int64_t block = std::clamp<int64_t>(kReduceScratchBytes / (2 * scratch_rows * esize), 1, longest);
  const int64_t blocks = (longest + block - 1) / block;
  auto* scratch = static_cast<std::byte*>(p.scratch(2 * scratch_rows * block * esize));
  auto* data = static_cast<std::byte*>(in.data_ptr());
  const int units = mt.units_per_element;
  std::vector<int> send_counts(group_size), send_displs(group_size), recv_counts(group_size),
      recv_displs(group_size);
  MPI_Request request = MPI_REQUEST_NULL;
  auto mine_in = [&](int64_t b) { return std::clamp<int64_t>(mine - b * block, 0, block); };
  auto half = [&](int64_t b) { return scratch + (b % 2) * peers * block * esize; };
  auto post = [&](int64_t b) {
    const int64_t begin = b * block;
    for (int r = 0; r < group_size; ++r) {
      const bool self = r == me;
      send_counts[r] = self ? 0 : static_cast<int>(std::clamp<int64_t>(lengths[r] - begin, 0, block) * units);
      send_displs[r] = static_cast<int>((offsets[r] + std::min(begin, lengths[r])) * units);
      recv_counts[r] = self ? 0 : static_cast<int>(mine_in(b) * units);
      const int row = r < me ? r : std::max(r - 1, 0);  // the peers' rows in rank order (none for itself)
      recv_displs[r] = static_cast<int>(row * mine_in(b) * units);
    }
    MPI_Ialltoallv(data, send_counts.data(), send_displs.data(), mt.type, half(b), recv_counts.data(),
                   recv_displs.data(), mt.type, comm, &request);
    if (last && b + 1 == blocks) p.done_posting();
  };
  post(0);
  for (int64_t b = 0; b < blocks; ++b) {
    co_await p.wait(request);  // block b is in; its counts arrays are free again
    if (b + 1 < blocks) post(b + 1);
    const int64_t len = mine_in(b);
    if (len > 0) {
      reduce_into(out.narrow(0, b * block, len), in.narrow(0, offsets[me] + b * block, len),
                  scratch_view(half(b), peers, len, in.scalar_type()), op);
    }
  }
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, int rank, std::vector<int> world_ranks,
                                 const std::string& name, std::chrono::milliseconds timeout,
                                 std::shared_ptr<const NodeMap> nodes)
    : CommunicatorBase(rank, std::move(world_ranks), name, timeout, std::move(nodes)),
      comm_(comm),
      lane_(std::make_shared<LaneState>()) {}

MpiCommunicator::~MpiCommunicator() {
  // Freed in queue order after the collectives still using it; skipped after
  // shutdown() (MPI is finalized then).
  ProgressEngine& engine = ProgressEngine::instance();
  if (!engine.running()) return;
  CommTask task;
  task.collective = "communicator free";
  task.group = name();
  task.timeout = timeout();
  task.lane = lane_;
  MPI_Comm comm = comm_;
  task.body = [comm](Progress&) mutable -> CommJob {
    MPI_Comm_free(&comm);
    co_return;
  };
  try {
    engine.submit(std::move(task));
  } catch (...) {
    // shutdown() raced with us: MPI_Finalize releases the communicator.
  }
}

WorkPtr MpiCommunicator::submit(const char* collective, bool caller_waits,
                                std::function<void()> blocking,
                                std::function<CommJob(Progress&)> body) {
  ProgressEngine& engine = ProgressEngine::instance();
  CommTask task;
  task.collective = collective;
  task.group = name();
  task.timeout = timeout();
  task.lane = lane_;
  task.caller_waits = caller_waits;
  task.blocking = std::move(blocking);
  task.body = std::move(body);
  if (caller_waits) {
    const CallerWaitTimer timer;  // the caller waits for this one, wherever it runs
    if (engine.try_run_on_caller(task)) return std::make_shared<CompletedWork>();
  }
  auto work = std::make_shared<AsyncWork>();
  task.work = work;
  engine.submit(std::move(task));
  return work;
}

WorkPtr MpiCommunicator::all_gather_into_async(const at::Tensor& out, const at::Tensor& in) {
  return all_gather(out, in, false);
}
void MpiCommunicator::all_gather_into(const at::Tensor& out, const at::Tensor& in) {
  all_gather(out, in, true)->wait();
}

WorkPtr MpiCommunicator::all_gather(const at::Tensor& out, const at::Tensor& in,
                                    bool caller_waits) {
  check_all_gather(name(), size(), rank(), out, in);
  check_cpu("all_gather", name(), out, "out");
  check_cpu("all_gather", name(), in, "in");
  record(CollectiveKind::AllGather, static_cast<int64_t>(in.nbytes()));
  record_sends_to_each_peer(CollectiveKind::AllGather, static_cast<int64_t>(in.nbytes()));
  const MpiMoveType mt = mpi_move_type(in.scalar_type());
  const int count = mpi_count(in.numel() * mt.units_per_element, "all_gather", name());
  mpi_count(out.numel() * mt.units_per_element, "all_gather", name());
  const bool in_place = in.numel() > 0 && static_cast<const char*>(in.data_ptr()) ==
                                              static_cast<const char*>(out.data_ptr()) +
                                                  static_cast<int64_t>(rank()) * in.nbytes();
  MPI_Comm comm = comm_;
  auto blocking = [=] {
    if (count == 0) return;
    MPI_Allgather(in_place ? MPI_IN_PLACE : in.data_ptr(), count, mt.type, out.data_ptr(), count,
                  mt.type, comm);
  };
  return submit("all_gather", caller_waits, blocking, [=](Progress& p) -> CommJob {
    if (count == 0) co_return;
    void* send = in_place ? MPI_IN_PLACE : in.data_ptr();
    MPI_Request request;
    MPI_Iallgather(send, count, mt.type, out.data_ptr(), count, mt.type, comm, &request);
    p.done_posting();
    co_await p.wait(request);
  });
}

WorkPtr MpiCommunicator::all_gather_segments_async(const at::Tensor& out, const at::Tensor& in,
                                                   const std::vector<int64_t>& segment_numels) {
  check_all_gather_segments(name(), size(), rank(), out, in, segment_numels);
  check_cpu("all_gather", name(), out, "out");
  check_cpu("all_gather", name(), in, "in");
  record(CollectiveKind::AllGather, static_cast<int64_t>(in.nbytes()));
  record_sends_to_each_peer(CollectiveKind::AllGather, static_cast<int64_t>(in.nbytes()));
  const MpiMoveType mt = mpi_move_type(in.scalar_type());
  // One MPI all-gather per non-empty segment, all posted before the first is
  // awaited (MPI starts collectives of one communicator in posting order):
  // each lands in its region directly, where one gather of the whole buffer
  // would need a copy into the regions afterwards.
  struct Segment {
    int64_t offset_bytes;  // in `in`; the region in `out` starts at size() times it
    int count;
  };
  std::vector<Segment> segments;
  int64_t offset = 0;
  for (int64_t n : segment_numels) {
    if (n > 0) {
      mpi_count(n * mt.units_per_element * size(), "all_gather", name());  // the region in `out`
      segments.push_back({offset * static_cast<int64_t>(in.element_size()),
                          mpi_count(n * mt.units_per_element, "all_gather", name())});
    }
    offset += n;
  }
  auto* send = static_cast<std::byte*>(in.data_ptr());
  auto* recv = static_cast<std::byte*>(out.data_ptr());
  const int group_size = size();
  MPI_Comm comm = comm_;
  // The tensors ride along in the job so they outlive it whatever the caller does.
  return submit("all_gather", false, nullptr,
                [=, keep_in = in, keep_out = out](Progress& p) -> CommJob {
                  std::vector<MPI_Request> requests(segments.size(), MPI_REQUEST_NULL);
                  for (size_t i = 0; i < segments.size(); ++i) {
                    MPI_Iallgather(send + segments[i].offset_bytes, segments[i].count, mt.type,
                                   recv + group_size * segments[i].offset_bytes, segments[i].count, mt.type,
                                   comm, &requests[i]);
                  }
                  p.done_posting();
                  for (MPI_Request& r : requests) co_await p.wait(r);
                });
}

WorkPtr MpiCommunicator::reduce_scatter_from_async(const at::Tensor& out, const at::Tensor& in,
                                                   ReduceOp op) {
  return reduce_scatter(out, in, op, false);
}
void MpiCommunicator::reduce_scatter_from(const at::Tensor& out, const at::Tensor& in,
                                          ReduceOp op) {
  reduce_scatter(out, in, op, true)->wait();
}

WorkPtr MpiCommunicator::reduce_scatter(const at::Tensor& out, const at::Tensor& in, ReduceOp op,
                                        bool caller_waits) {
  check_reduce_scatter(name(), size(), out, in);
  check_cpu("reduce_scatter", name(), out, "out");
  check_cpu("reduce_scatter", name(), in, "in");
  record(CollectiveKind::ReduceScatter, static_cast<int64_t>(in.nbytes()));
  record_sends_to_each_peer(CollectiveKind::ReduceScatter, static_cast<int64_t>(out.nbytes()));  // chunk j to rank j
  const MPI_Datatype reduce_type = mpi_reduce_type(in.scalar_type());
  const bool native_ok = reduce_type != MPI_DATATYPE_NULL && !bytes_overlap(out, in);
  const auto algorithm = resolve(algorithms().reduce_scatter, native_ok,
                                 static_cast<int64_t>(in.nbytes()), size());
  const MpiMoveType mt = mpi_move_type(in.scalar_type());
  const int64_t n = out.numel();
  const int count = mpi_count(n * mt.units_per_element, "reduce_scatter", name());
  mpi_count(in.numel() * mt.units_per_element, "reduce_scatter", name());
  const int group_size = size();
  const int me = rank();
  MPI_Comm comm = comm_;
  if (algorithm == ReduceScatterAlgorithm::Native) {
    auto blocking = [=] {
      if (n == 0) return;
      MPI_Reduce_scatter_block(in.data_ptr(), out.data_ptr(), count, reduce_type, mpi_op(op), comm);
    };
    return submit("reduce_scatter", caller_waits, blocking, [=](Progress& p) -> CommJob {
      if (n == 0) co_return;
      MPI_Request request;
      MPI_Ireduce_scatter_block(in.data_ptr(), out.data_ptr(), count, reduce_type, mpi_op(op),
                                comm, &request);
      p.done_posting();
      co_await p.wait(request);
    });
  }
  // All-to-all moves chunk r of every rank to rank r, which then reduces the
  // chunks with its own locally: one pass of communication, one of arithmetic, and
  // works for every dtype (MPI cannot add bf16/fp16). Pipelined over column
  // blocks of the chunks (pipelined_reduce), so the scratch is bounded.
  return submit("reduce_scatter", caller_waits, nullptr, [=](Progress& p) -> CommJob {
    std::vector<int64_t> offsets(group_size), lengths(group_size, n);
    for (int r = 0; r < group_size; ++r) offsets[r] = r * n;
    co_await pipelined_reduce(p, comm, me, mt, in.view(-1), offsets, lengths, out.view(-1), op, true);
  });
}

WorkPtr MpiCommunicator::all_reduce_async(const at::Tensor& tensor, ReduceOp op) {
  return all_reduce(tensor, op, false);
}
void MpiCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  all_reduce(tensor, op, true)->wait();
}

WorkPtr MpiCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp op, bool caller_waits) {
  check_all_reduce(name(), tensor);
  check_cpu("all_reduce", name(), tensor, "tensor");
  record(CollectiveKind::AllReduce, static_cast<int64_t>(tensor.nbytes()));
  const MPI_Datatype reduce_type = mpi_reduce_type(tensor.scalar_type());
  const bool native_ok = reduce_type != MPI_DATATYPE_NULL;
  const int64_t bytes = static_cast<int64_t>(tensor.nbytes());
  const auto algorithm = resolve(algorithms().all_reduce, native_ok, bytes, size());
  // The choice when the engine lets the job block (docs/bench/comm.md).
  const bool blocking_native = native_ok && resolve_blocking(algorithms().all_reduce, bytes, size());
  const int64_t numel = tensor.numel();
  const MpiMoveType mt = mpi_move_type(tensor.scalar_type());
  const int count = mpi_count(numel * mt.units_per_element, "all_reduce", name());
  MPI_Comm comm = comm_;
  // Reduce-scatter + all-gather over ceil(numel / size)-element chunks (the
  // last ones shorter or empty), in place: each element is reduced once, by
  // its owner, so all ranks end bitwise equal.
  const int group_size = size();
  const int me = rank();
  const int64_t chunk = (numel + group_size - 1) / group_size;
  std::vector<int> counts(group_size), displs(group_size);
  std::vector<int64_t> offsets(group_size), lengths(group_size);
  for (int j = 0; j < group_size; ++j) {
    offsets[j] = j * chunk;
    lengths[j] = std::clamp<int64_t>(numel - j * chunk, 0, chunk);
    counts[j] = static_cast<int>(lengths[j] * mt.units_per_element);
    displs[j] = static_cast<int>(offsets[j] * mt.units_per_element);
  }
  const int64_t my_elements = lengths[me];
  record_all_reduce_sends(numel, static_cast<int64_t>(tensor.element_size()));
  std::function<void()> blocking;
  if (blocking_native) {
    blocking = [=] {
      if (numel == 0) return;
      MPI_Allreduce(MPI_IN_PLACE, tensor.data_ptr(), count, reduce_type, mpi_op(op), comm);
    };
  }
  return submit("all_reduce", caller_waits, blocking, [=](Progress& p) -> CommJob {
    if (numel == 0) co_return;
    MPI_Request request;
    if (algorithm == AllReduceAlgorithm::Native) {
      MPI_Iallreduce(MPI_IN_PLACE, tensor.data_ptr(), count, reduce_type, mpi_op(op), comm,
                     &request);
      p.done_posting();
      co_await p.wait(request);
      co_return;
    }
    co_await pipelined_reduce(p, comm, me, mt, tensor.view(-1), offsets, lengths,
                              tensor.view(-1).narrow(0, std::min(me * chunk, numel), my_elements),
                              op, false);
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, tensor.data_ptr(), counts.data(),
                    displs.data(), mt.type, comm, &request);
    p.done_posting();
    co_await p.wait(request);
  });
}

WorkPtr MpiCommunicator::all_to_all_async(const at::Tensor& out, const at::Tensor& in) {
  return all_to_all(out, in, false);
}
void MpiCommunicator::all_to_all(const at::Tensor& out, const at::Tensor& in) {
  all_to_all(out, in, true)->wait();
}

WorkPtr MpiCommunicator::all_to_all(const at::Tensor& out, const at::Tensor& in,
                                    bool caller_waits) {
  check_all_to_all(name(), size(), out, in);
  check_cpu("all_to_all", name(), out, "out");
  check_cpu("all_to_all", name(), in, "in");
  record(CollectiveKind::AllToAll, static_cast<int64_t>(in.nbytes()));
  record_sends_to_each_peer(CollectiveKind::AllToAll, static_cast<int64_t>(in.nbytes()) / size());
  const MpiMoveType mt = mpi_move_type(in.scalar_type());
  mpi_count(in.numel() * mt.units_per_element, "all_to_all", name());
  const int count = static_cast<int>(in.numel() / size() * mt.units_per_element);
  MPI_Comm comm = comm_;
  auto blocking = [=] {
    if (count == 0) return;
    MPI_Alltoall(in.data_ptr(), count, mt.type, out.data_ptr(), count, mt.type, comm);
  };
  return submit("all_to_all", caller_waits, blocking, [=](Progress& p) -> CommJob {
    if (count == 0) co_return;
    MPI_Request request;
    MPI_Ialltoall(in.data_ptr(), count, mt.type, out.data_ptr(), count, mt.type, comm, &request);
    p.done_posting();
    co_await p.wait(request);
  });
}

WorkPtr MpiCommunicator::all_to_all_v_async(const at::Tensor& out, const std::vector<int64_t>& out_counts,
                                            const at::Tensor& in, const std::vector<int64_t>& in_counts) {
  return all_to_all_v(out, out_counts, in, in_counts, false);
}
void MpiCommunicator::all_to_all_v(const at::Tensor& out, const std::vector<int64_t>& out_counts,
                                   const at::Tensor& in, const std::vector<int64_t>& in_counts) {
  all_to_all_v(out, out_counts, in, in_counts, true)->wait();
}

WorkPtr MpiCommunicator::all_to_all_v(const at::Tensor& out, const std::vector<int64_t>& out_counts,
                                      const at::Tensor& in, const std::vector<int64_t>& in_counts,
                                      bool caller_waits) {
  const int64_t row = check_all_to_all_v(name(), size(), out, out_counts, in, in_counts);
  check_cpu("all_to_all_v", name(), out, "out");
  check_cpu("all_to_all_v", name(), in, "in");
  record(CollectiveKind::AllToAll, static_cast<int64_t>(in.nbytes()));
  std::vector<int64_t> to_member(in_counts.size());
  for (std::size_t r = 0; r < in_counts.size(); ++r) to_member[r] = in_counts[r] * row;
  record_sends(CollectiveKind::AllToAll, to_member, static_cast<int64_t>(in.element_size()));
  const MpiMoveType mt = mpi_move_type(in.scalar_type());
  // MPI's counts and displacements are int: the totals must fit, then every
  // partial sum does too.
  mpi_count(in.numel() * mt.units_per_element, "all_to_all_v", name());
  mpi_count(out.numel() * mt.units_per_element, "all_to_all_v", name());
  const int group_size = size();
  auto send_counts = std::make_shared<std::vector<int>>(group_size);
  auto send_displs = std::make_shared<std::vector<int>>(group_size);
  auto recv_counts = std::make_shared<std::vector<int>>(group_size);
  auto recv_displs = std::make_shared<std::vector<int>>(group_size);
  const int64_t unit = row * mt.units_per_element;
  int64_t send_at = 0, recv_at = 0;
  for (int r = 0; r < group_size; ++r) {
    (*send_counts)[r] = static_cast<int>(in_counts[r] * unit);
    (*send_displs)[r] = static_cast<int>(send_at);
    (*recv_counts)[r] = static_cast<int>(out_counts[r] * unit);
    (*recv_displs)[r] = static_cast<int>(recv_at);
    send_at += in_counts[r] * unit;
    recv_at += out_counts[r] * unit;
  }
  MPI_Comm comm = comm_;
  // Every rank takes part even with nothing to send or receive: the others'
  // collective matches it.
  auto blocking = [=] {
    MPI_Alltoallv(in.data_ptr(), send_counts->data(), send_displs->data(), mt.type, out.data_ptr(),
                  recv_counts->data(), recv_displs->data(), mt.type, comm);
  };
  return submit("all_to_all_v", caller_waits, blocking, [=](Progress& p) -> CommJob {
    MPI_Request request;
    MPI_Ialltoallv(in.data_ptr(), send_counts->data(), send_displs->data(), mt.type, out.data_ptr(),
                   recv_counts->data(), recv_displs->data(), mt.type, comm, &request);
    p.done_posting();
    co_await p.wait(request);
  });
}

WorkPtr MpiCommunicator::broadcast_async(const at::Tensor& tensor, int root) {
  return broadcast(tensor, root, false);
}
void MpiCommunicator::broadcast(const at::Tensor& tensor, int root) {
  broadcast(tensor, root, true)->wait();
}

WorkPtr MpiCommunicator::broadcast(const at::Tensor& tensor, int root, bool caller_waits) {
  check_broadcast(name(), size(), tensor, root);
  check_cpu("broadcast", name(), tensor, "tensor");
  record(CollectiveKind::Broadcast, static_cast<int64_t>(tensor.nbytes()));
  if (rank() == root) record_sends_to_each_peer(CollectiveKind::Broadcast, static_cast<int64_t>(tensor.nbytes()));
  const MpiMoveType mt = mpi_move_type(tensor.scalar_type());
  const int count = mpi_count(tensor.numel() * mt.units_per_element, "broadcast", name());
  MPI_Comm comm = comm_;
  auto blocking = [=] {
    if (count == 0) return;
    MPI_Bcast(tensor.data_ptr(), count, mt.type, root, comm);
  };
  return submit("broadcast", caller_waits, blocking, [=](Progress& p) -> CommJob {
    if (count == 0) co_return;
    MPI_Request request;
    MPI_Ibcast(tensor.data_ptr(), count, mt.type, root, comm, &request);
    p.done_posting();
    co_await p.wait(request);
  });
}

WorkPtr MpiCommunicator::barrier_async() { return barrier(false); }
void MpiCommunicator::barrier() { barrier(true)->wait(); }

WorkPtr MpiCommunicator::barrier(bool caller_waits) {
  record(CollectiveKind::Barrier, 0);
  MPI_Comm comm = comm_;
  return submit("barrier", caller_waits, nullptr, [=](Progress& p) -> CommJob {
    // Never the blocking MPI_Barrier: a barrier mostly waits for late peers,
    // and the polled form lets the engine sleep meanwhile.
    MPI_Request request;
    MPI_Ibarrier(comm, &request);
    p.done_posting();
    co_await p.wait(request);
  });
}

WorkPtr MpiCommunicator::ring_shift_async(const at::Tensor& out, const at::Tensor& in) {
  check_ring_shift(name(), out, in);
  check_cpu("ring_shift", name(), out, "out");
  check_cpu("ring_shift", name(), in, "in");
  record(CollectiveKind::RingShift, static_cast<int64_t>(in.nbytes()));
  const int group_size = size();
  const int next = (rank() + 1) % group_size;
  const int previous = (rank() + group_size - 1) % group_size;
  std::vector<int64_t> to_member(static_cast<size_t>(group_size), 0);
  to_member[static_cast<size_t>(next)] = in.numel();
  record_sends(CollectiveKind::RingShift, to_member, static_cast<int64_t>(in.element_size()));
  const MpiMoveType mt = mpi_move_type(in.scalar_type());
  const int count = mpi_count(in.numel() * mt.units_per_element, "ring_shift", name());
  MPI_Comm comm = comm_;
  // Point-to-point messages of one (source, tag, communicator) match in the
  // order they were posted, and every rank posts its shifts in the same
  // order, so one tag serves all of them.
  constexpr int kTag = 17;
  return submit("ring_shift", false, nullptr, [=](Progress& p) -> CommJob {
    if (count == 0) co_return;
    if (group_size == 1) {
      std::memcpy(out.data_ptr(), in.data_ptr(), in.nbytes());
      co_return;
    }
    MPI_Request receive, send;
    MPI_Irecv(out.data_ptr(), count, mt.type, previous, kTag, comm, &receive);
    MPI_Isend(in.data_ptr(), count, mt.type, next, kTag, comm, &send);
    p.done_posting();
    co_await p.wait(receive);
    co_await p.wait(send);
  });
}

CommunicatorPtr MpiCommunicator::split(int color, int key, const std::string& name) {
  TESSEL_CHECK(color >= 0,
               "split of group '{}' into '{}': color {} is negative; every rank must pass a "
               "color >= 0",
               this->name(), name, color);
  auto result = std::make_shared<CommunicatorPtr>();
  const int group_size = size();
  const int world_rank = world_ranks()[rank()];
  const auto timeout = this->timeout();
  const auto nodes = node_map();
  MPI_Comm comm = comm_;
  // The colors and keys travel first through a nonblocking all-gather, so a
  // dead peer ends in the timeout message rather than a hang in the blocking
  // MPI_Comm_split; the gathered table also names the new group's members.
  submit("split", true, nullptr, [=](Progress& p) -> CommJob {
    int mine[3] = {color, key, world_rank};
    std::vector<int> all(3 * group_size);
    MPI_Request request;
    MPI_Iallgather(mine, 3, MPI_INT, all.data(), 3, MPI_INT, comm, &request);
    co_await p.wait(request);
    MPI_Comm sub;
    MPI_Comm_split(comm, color, key, &sub);
    std::vector<std::pair<int, int>> members;  // (key, parent rank), MPI's order
    for (int r = 0; r < group_size; ++r) {
      if (all[3 * r] == color) members.emplace_back(all[3 * r + 1], r);
    }
    std::sort(members.begin(), members.end());
    std::vector<int> world_ranks;
    int sub_rank = -1;
    for (const auto& [k, r] : members) {
      if (all[3 * r + 2] == world_rank) sub_rank = static_cast<int>(world_ranks.size());
      world_ranks.push_back(all[3 * r + 2]);
    }
    *result = std::make_shared<MpiCommunicator>(sub, sub_rank, std::move(world_ranks), name,
                                                timeout, nodes);
  })->wait();
  return *result;
}

}  // namespace tessel::dist
