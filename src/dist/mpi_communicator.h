// MPI backend over CPU tensors. Each collective is validated on the calling
// thread (errors throw there, before any communication), counted, and queued
// on the process's progress engine (progress_engine.h) in this
// communicator's lane, where a coroutine (comm_job.h) runs it with
// nonblocking MPI calls; a collective whose caller waits at once runs as the
// blocking MPI call where that is faster, on the caller's thread when the
// lane is idle. Data moves straight between the
// caller's tensors where MPI allows; reductions that need an intermediate
// buffer use the engine's reused scratch. See algorithms.h for the
// reduction paths.
#pragma once

#include "dist/mpi_c.h"

#include <functional>

#include "dist/progress_engine.h"
#include "dist/communicator_base.h"

namespace tessel::dist {

class MpiCommunicator : public CommunicatorBase {
 public:
  // Takes ownership of `comm` (freed on the communication thread when this
  // object goes away). `rank` is this process's rank in `comm`.
  MpiCommunicator(MPI_Comm comm, int rank, std::vector<int> world_ranks, const std::string& name,
                  std::chrono::milliseconds timeout, std::shared_ptr<const NodeMap> nodes = nullptr);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  WorkPtr all_gather_into_async(const at::Tensor& out, const at::Tensor& in) override;
  WorkPtr all_gather_into_in_order_async(const at::Tensor& out, const at::Tensor& in, int64_t piece_bytes,
                                         int pieces_in_flight) override;
  WorkPtr all_gather_segments_async(const at::Tensor& out, const at::Tensor& in,
                                    const std::vector<int64_t>& segment_numels) override;
  WorkPtr reduce_scatter_from_async(const at::Tensor& out, const at::Tensor& in,
                                    ReduceOp op) override;
  WorkPtr all_reduce_async(const at::Tensor& tensor, ReduceOp op) override;
  WorkPtr all_to_all_async(const at::Tensor& out, const at::Tensor& in) override;
  WorkPtr all_to_all_v_async(const at::Tensor& out, const std::vector<int64_t>& out_counts, const at::Tensor& in,
                             const std::vector<int64_t>& in_counts) override;
  WorkPtr broadcast_async(const at::Tensor& tensor, int root) override;
  WorkPtr barrier_async() override;
  WorkPtr ring_shift_async(const at::Tensor& out, const at::Tensor& in) override;

  void all_gather_into(const at::Tensor& out, const at::Tensor& in) override;
  void reduce_scatter_from(const at::Tensor& out, const at::Tensor& in, ReduceOp op) override;
  void all_reduce(const at::Tensor& tensor, ReduceOp op) override;
  void all_to_all(const at::Tensor& out, const at::Tensor& in) override;
  void all_to_all_v(const at::Tensor& out, const std::vector<int64_t>& out_counts, const at::Tensor& in,
                    const std::vector<int64_t>& in_counts) override;
  void broadcast(const at::Tensor& tensor, int root) override;
  void barrier() override;

  CommunicatorPtr split(int color, int key, const std::string& name) override;

 private:
  // Each collective once; `caller_waits` is true for the synchronous form.
  WorkPtr all_gather(const at::Tensor& out, const at::Tensor& in, bool caller_waits);
  WorkPtr reduce_scatter(const at::Tensor& out, const at::Tensor& in, ReduceOp op,
                         bool caller_waits);
  WorkPtr all_reduce(const at::Tensor& tensor, ReduceOp op, bool caller_waits);
  WorkPtr all_to_all(const at::Tensor& out, const at::Tensor& in, bool caller_waits);
  WorkPtr all_to_all_v(const at::Tensor& out, const std::vector<int64_t>& out_counts, const at::Tensor& in,
                       const std::vector<int64_t>& in_counts, bool caller_waits);
  WorkPtr broadcast(const at::Tensor& tensor, int root, bool caller_waits);
  WorkPtr barrier(bool caller_waits);

  // `blocking`: the blocking MPI call for a caller that waits at once, or
  // null where the nonblocking `body` is the faster path even then.
  WorkPtr submit(const char* collective, bool caller_waits, std::function<void()> blocking,
                 std::function<CommJob(Progress&)> body);

  MPI_Comm comm_;
  std::shared_ptr<LaneState> lane_;  // this communicator's lane in the progress engine
};

}  // namespace tessel::dist
