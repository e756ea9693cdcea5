// A stand-in for one rank's view of a group that does not exist: it reports a
// size and a rank, and every collective throws. Dry runs use it (`tessel plan`
// applies a plan to a meta-device model as tp rank r of N, to measure each
// rank's parameter bytes, without launching N processes); applying a plan
// only slices parameters and installs hooks, so no collective is reached.
#pragma once

#include "dist/communicator_base.h"

namespace tessel::dist {

class ShapeOnlyCommunicator : public CommunicatorBase {
 public:
  ShapeOnlyCommunicator(int size, int rank, const std::string& name);

  WorkPtr all_gather_into_async(const at::Tensor& out, const at::Tensor& in) override;
  WorkPtr all_gather_segments_async(const at::Tensor& out, const at::Tensor& in,
                                    const std::vector<int64_t>& segment_numels) override;
  WorkPtr reduce_scatter_from_async(const at::Tensor& out, const at::Tensor& in, ReduceOp op) override;
  WorkPtr all_reduce_async(const at::Tensor& tensor, ReduceOp op) override;
  WorkPtr all_to_all_async(const at::Tensor& out, const at::Tensor& in) override;
  WorkPtr all_to_all_v_async(const at::Tensor& out, const std::vector<int64_t>& out_counts, const at::Tensor& in,
                             const std::vector<int64_t>& in_counts) override;
  WorkPtr broadcast_async(const at::Tensor& tensor, int root) override;
  WorkPtr barrier_async() override;
  WorkPtr ring_shift_async(const at::Tensor& out, const at::Tensor& in) override;
  CommunicatorPtr split(int color, int key, const std::string& name) override;
};

}  // namespace tessel::dist
