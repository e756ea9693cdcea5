#include "tensor/all_to_all_rows.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <numeric>

#include "core/error.h"
#include "tensor/saved_group.h"

namespace tessel::tensor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor move_rows(const at::Tensor& x, dist::Communicator& group, const std::vector<int64_t>& send_counts,
                     const std::vector<int64_t>& recv_counts) {
  const at::Tensor in = x.contiguous();
  std::vector<int64_t> shape = in.sizes().vec();
  shape[0] = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
  at::Tensor out = at::empty(shape, in.options());
  group.all_to_all_v(out, recv_counts, in, send_counts);
  return out;
}

struct AllToAllRows : torch::autograd::Function<AllToAllRows> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const dist::CommunicatorPtr& group,
                            const std::vector<int64_t>& send_counts, const std::vector<int64_t>& recv_counts) {
    ctx->saved_data["group"] = detail::save_group(group);
    ctx->saved_data["send_counts"] = send_counts;
    ctx->saved_data["recv_counts"] = recv_counts;
    return move_rows(x, *group, send_counts, recv_counts);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const dist::CommunicatorPtr group = detail::load_group(ctx->saved_data["group"]);
    // The reverse exchange: what arrived from rank r goes back to r.
    const at::Tensor grad = move_rows(grads[0], *group, ctx->saved_data["recv_counts"].toIntVector(),
                                      ctx->saved_data["send_counts"].toIntVector());
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor all_to_all_rows(const at::Tensor& x, const dist::CommunicatorPtr& group,
                           const std::vector<int64_t>& send_counts, const std::vector<int64_t>& recv_counts) {
  TESSEL_CHECK(group != nullptr, "all_to_all_rows: the communicator is null");
  TESSEL_CHECK(x.defined() && x.dim() >= 1, "all_to_all_rows: x must be a defined tensor with a row dimension");
  return AllToAllRows::apply(x, group, send_counts, recv_counts);
}

std::vector<int64_t> exchange_counts(const std::vector<int64_t>& send_counts, dist::Communicator& group) {
  TESSEL_CHECK(static_cast<int>(send_counts.size()) == group.size(),
               "exchange_counts on group '{}': {} counts for {} ranks", group.name(), send_counts.size(),
               group.size());
  const at::Tensor send = at::tensor(send_counts, at::kLong);
  at::Tensor recv = at::empty_like(send);
  group.all_to_all(recv, send);
  return {recv.data_ptr<int64_t>(), recv.data_ptr<int64_t>() + recv.numel()};
}

}  // namespace tessel::tensor
