// DeviceCommunicator: a group's communicator when its ranks compute on a
// device (SPEC 10). It routes each collective by where its tensors are:
// host tensors (the trainer's counts and flags, checkpoint metadata) to the
// group's host communicator (MPI), device tensors to the device's
// collectives (NCCL), or, without those (TESSEL_COMM=mpi: several ranks on
// one GPU with an NCCL that refuses that), through host memory: copied out,
// reduced or moved by the host communicator, copied back when waited for.
// Every rank must pass tensors of the same kind to a collective (they pair
// up by order). Barriers are the host's. Counters add both paths.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <string>

#include "dist/communicator.h"
#include "dist/device_collectives.h"

namespace tessel::dist {

class DeviceCommunicator : public Communicator {
 public:
  // `device` null: device tensors are staged through host memory.
  DeviceCommunicator(CommunicatorPtr host, std::shared_ptr<DeviceCollectives> device);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& name() const override { return host_->name(); }
  const std::vector<int>& world_ranks() const override { return host_->world_ranks(); }

  WorkPtr all_gather_into_async(const at::Tensor& out, const at::Tensor& in) override;
  WorkPtr all_gather_into_in_order_async(const at::Tensor& out, const at::Tensor& in, int64_t piece_bytes,
                                         int pieces_in_flight) override;
  WorkPtr all_gather_segments_async(const at::Tensor& out, const at::Tensor& in,
                                    const std::vector<int64_t>& segment_numels) override;
  WorkPtr reduce_scatter_from_async(const at::Tensor& out, const at::Tensor& in,
                                    ReduceOp op) override;
  WorkPtr all_reduce_async(const at::Tensor& tensor, ReduceOp op) override;
  WorkPtr all_to_all_async(const at::Tensor& out, const at::Tensor& in) override;
  WorkPtr all_to_all_v_async(const at::Tensor& out, const std::vector<int64_t>& out_counts,
                             const at::Tensor& in, const std::vector<int64_t>& in_counts) override;
  WorkPtr broadcast_async(const at::Tensor& tensor, int root) override;
  WorkPtr barrier_async() override { return host_->barrier_async(); }
  void barrier() override { host_->barrier(); }
  WorkPtr ring_shift_async(const at::Tensor& out, const at::Tensor& in) override;

  // The synchronous forms: host tensors take the host communicator's own
  // (MPI's blocking calls), device tensors wait at once.
  void all_gather_into(const at::Tensor& out, const at::Tensor& in) override;
  void reduce_scatter_from(const at::Tensor& out, const at::Tensor& in,
                           ReduceOp op = ReduceOp::Sum) override;
  void all_reduce(const at::Tensor& tensor, ReduceOp op = ReduceOp::Sum) override;
  void all_to_all(const at::Tensor& out, const at::Tensor& in) override;
  void all_to_all_v(const at::Tensor& out, const std::vector<int64_t>& out_counts,
                    const at::Tensor& in, const std::vector<int64_t>& in_counts) override;
  void broadcast(const at::Tensor& tensor, int root) override;

  CommunicatorPtr split(int color, int key, const std::string& name) override;

  std::chrono::milliseconds timeout() const override { return host_->timeout(); }
  void set_timeout(std::chrono::milliseconds timeout) override;
  CollectiveCounters counters() const override;
  void reset_counters() override;

  const CommunicatorPtr& host() const { return host_; }
  // "NCCL 2.28.9" or "MPI, device tensors staged through host memory".
  std::string device_path() const;

 private:
  // Whether the collective's tensors are device tensors (all of one kind).
  bool on_device(const char* collective, std::initializer_list<const at::Tensor*> tensors) const;

  CommunicatorPtr host_;
  std::shared_ptr<DeviceCollectives> device_;
};

}  // namespace tessel::dist
