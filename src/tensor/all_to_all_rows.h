// The token exchange of expert parallelism as an autograd operation: rows of
// x move between the ranks of a group with variable counts
// (Communicator::all_to_all_v), and backward moves the rows' gradients back
// the same way reversed (what rank j received from rank r returns to r, in
// the order r sent it). Counts are rows per group rank; send_counts[j] on
// rank r equals recv_counts[r] on rank j (the caller exchanged them first).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "dist/communicator.h"

namespace tessel::tensor {

// x [sum(send_counts), ...] -> [sum(recv_counts), ...]
at::Tensor all_to_all_rows(const at::Tensor& x, const dist::CommunicatorPtr& group,
                           const std::vector<int64_t>& send_counts, const std::vector<int64_t>& recv_counts);

// Every rank's send counts to every other: this rank's recv_counts, from an
// all-to-all of one int64 per peer.
std::vector<int64_t> exchange_counts(const std::vector<int64_t>& send_counts, dist::Communicator& group);

}  // namespace tessel::tensor
