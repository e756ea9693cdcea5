// Argument checks shared by every communicator backend. A wrong shape or dtype
// caught before any communication throws tessel::Error on the calling rank
// with the collective, the group and the offending value in the message,
// instead of corrupting memory or deadlocking inside the backend.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "dist/communicator.h"

namespace tessel::dist {

// Whether the memory of two contiguous tensors overlaps.
bool bytes_overlap(const at::Tensor& a, const at::Tensor& b);

// Dtypes the reductions (reduce-scatter, all-reduce) accept.
bool is_reducible_dtype(at::ScalarType dtype);

// `in` may be this rank's slot of `out` (in place); any other overlap throws.
void check_all_gather(const std::string& group, int size, int rank, const at::Tensor& out,
                      const at::Tensor& in);
// check_all_gather's checks, and: segments are non-negative and cover `in`
// exactly; `in` must not overlap `out` (no in-place form).
void check_all_gather_segments(const std::string& group, int size, int rank, const at::Tensor& out,
                               const at::Tensor& in, const std::vector<int64_t>& segment_numels);
void check_reduce_scatter(const std::string& group, int size, const at::Tensor& out,
                          const at::Tensor& in);
void check_all_reduce(const std::string& group, const at::Tensor& tensor);
void check_all_to_all(const std::string& group, int size, const at::Tensor& out,
                      const at::Tensor& in);
// Returns the elements of one row (sizes past dim 0).
int64_t check_all_to_all_v(const std::string& group, int size, const at::Tensor& out,
                           const std::vector<int64_t>& out_counts, const at::Tensor& in,
                           const std::vector<int64_t>& in_counts);
void check_ring_shift(const std::string& group, const at::Tensor& out, const at::Tensor& in);
void check_broadcast(const std::string& group, int size, const at::Tensor& tensor, int root);
// The MPI backend moves host memory only.
void check_cpu(const char* collective, const std::string& group, const at::Tensor& tensor,
               const char* what);

}  // namespace tessel::dist
