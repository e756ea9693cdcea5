// Single-process backend: the communicator of a world of one rank (no MPI).
// Every collective is its exact local math (all-gather, reduce-scatter and
// all-reduce of one rank are copies or no-ops), so a model trains the same
// way with one process as with many, and tests need no launcher.
#pragma once

#include "dist/communicator_base.h"

namespace tessel::dist {

class SingleProcessCommunicator : public CommunicatorBase {
 public:
  // The world group is named "world"; split() groups are "name (ranks r)".
  explicit SingleProcessCommunicator(const std::string& name = "world", int world_rank = 0);

  WorkPtr all_gather_into_async(const at::Tensor& out, const at::Tensor& in) override;
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

  // color and key are irrelevant with one rank: the result is a group of one.
  CommunicatorPtr split(int color, int key, const std::string& name) override;
};

}  // namespace tessel::dist
