// MPI backend over CPU tensors. Each collective is validated on the calling
// thread (errors throw there, before any communication), counted, and queued
// on the process's communication thread (comm_thread.h), which runs it with
// nonblocking MPI calls. Data moves straight between the caller's tensors
// where MPI allows; reductions that need an intermediate buffer use the
// thread's reused scratch buffer. See algorithms.h for the reduction paths.
#pragma once

#include "dist/mpi_c.h"

#include <functional>

#include "dist/comm_thread.h"
#include "dist/communicator_base.h"

namespace tessel::dist {

class MpiCommunicator : public CommunicatorBase {
 public:
  // Takes ownership of `comm` (freed on the communication thread when this
  // object goes away). `rank` is this process's rank in `comm`.
  MpiCommunicator(MPI_Comm comm, int rank, std::vector<int> world_ranks, const std::string& name,
                  std::chrono::milliseconds timeout);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  WorkPtr all_gather_into_async(const at::Tensor& out, const at::Tensor& in) override;
  WorkPtr reduce_scatter_from_async(const at::Tensor& out, const at::Tensor& in,
                                    ReduceOp op) override;
  WorkPtr all_reduce_async(const at::Tensor& tensor, ReduceOp op) override;
  WorkPtr all_to_all_async(const at::Tensor& out, const at::Tensor& in) override;
  WorkPtr broadcast_async(const at::Tensor& tensor, int root) override;
  WorkPtr barrier_async() override;

  CommunicatorPtr split(int color, int key, const std::string& name) override;

 private:
  WorkPtr submit(const char* collective, std::function<void(Progress&)> body);

  MPI_Comm comm_;
};

}  // namespace tessel::dist
