#include "tensor/autograd_collectives.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"
#include "tensor/chunking.h"
#include "tensor/dim_collectives.h"
#include "tensor/saved_group.h"

namespace tessel::tensor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

int64_t wrap(const at::Tensor& x, int64_t dim, const char* op) {
  TESSEL_CHECK(x.defined(), "{}: the input tensor is undefined", op);
  const int64_t n = x.dim();
  TESSEL_CHECK(dim >= -n && dim < n, "{}: dim {} is out of range for a tensor with {} dims", op, dim, n);
  return dim < 0 ? dim + n : dim;
}

void check_group(const dist::CommunicatorPtr& group, const char* op) {
  TESSEL_CHECK(group != nullptr, "{}: the communicator is null", op);
}

dist::CommunicatorPtr group_of(AutogradContext* ctx) { return detail::load_group(ctx->saved_data["group"]); }

std::vector<int64_t> sizes_of(AutogradContext* ctx, const char* key) {
  return ctx->saved_data[key].toIntVector();
}

struct CopyToGroup : torch::autograd::Function<CopyToGroup> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const dist::CommunicatorPtr& group) {
    ctx->saved_data["group"] = detail::save_group(group);
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {all_reduce_sum(grads[0], *group_of(ctx)), at::Tensor()};
  }
};

struct ReduceFromGroup : torch::autograd::Function<ReduceFromGroup> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, const dist::CommunicatorPtr& group) {
    return all_reduce_sum(x, *group);
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], at::Tensor()}; }
};

struct AllGatherAlong : torch::autograd::Function<AllGatherAlong> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t dim,
                            const dist::CommunicatorPtr& group, const std::vector<int64_t>& sizes,
                            bool reduce_grad) {
    ctx->saved_data["group"] = detail::save_group(group);
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["sizes"] = sizes;
    ctx->saved_data["reduce_grad"] = reduce_grad;
    return all_gather_dim(x, dim, *group, sizes);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto group = group_of(ctx);
    const int64_t dim = ctx->saved_data["dim"].toInt();
    const auto sizes = sizes_of(ctx, "sizes");
    at::Tensor grad;
    if (ctx->saved_data["reduce_grad"].toBool()) {
      grad = reduce_scatter_dim(grads[0], dim, *group, sizes);
    } else {
      int64_t offset = 0;
      for (int r = 0; r < group->rank(); ++r) offset += sizes[static_cast<size_t>(r)];
      grad = grads[0].narrow(dim, offset, sizes[static_cast<size_t>(group->rank())]).contiguous();
    }
    return {grad, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct ReduceScatterAlong : torch::autograd::Function<ReduceScatterAlong> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t dim,
                            const dist::CommunicatorPtr& group) {
    const auto sizes = chunk_sizes(x.size(dim), group->size());
    ctx->saved_data["group"] = detail::save_group(group);
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["sizes"] = sizes;
    return reduce_scatter_dim(x, dim, *group, sizes);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor grad =
        all_gather_dim(grads[0], ctx->saved_data["dim"].toInt(), *group_of(ctx), sizes_of(ctx, "sizes"));
    return {grad, at::Tensor(), at::Tensor()};
  }
};

struct SplitAlong : torch::autograd::Function<SplitAlong> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t dim,
                            const dist::CommunicatorPtr& group) {
    const int64_t n = x.size(dim);
    ctx->saved_data["group"] = detail::save_group(group);
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["sizes"] = chunk_sizes(n, group->size());
    // A copy, not a view: a view of the input returned from a custom function
    // could not be modified in place later.
    return x.narrow(dim, chunk_offset(n, group->size(), group->rank()),
                    chunk_size(n, group->size(), group->rank()))
        .clone(at::MemoryFormat::Contiguous);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor grad =
        all_gather_dim(grads[0], ctx->saved_data["dim"].toInt(), *group_of(ctx), sizes_of(ctx, "sizes"));
    return {grad, at::Tensor(), at::Tensor()};
  }
};

struct AllToAllAlong : torch::autograd::Function<AllToAllAlong> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t src_dim, int64_t dst_dim,
                            const dist::CommunicatorPtr& group, const std::vector<int64_t>& src_sizes) {
    const auto dst_sizes = chunk_sizes(x.size(dst_dim), group->size());
    ctx->saved_data["group"] = detail::save_group(group);
    ctx->saved_data["src_dim"] = src_dim;
    ctx->saved_data["dst_dim"] = dst_dim;
    ctx->saved_data["src_sizes"] = src_sizes;
    ctx->saved_data["dst_sizes"] = dst_sizes;
    return all_to_all_dim(x, src_dim, src_sizes, dst_dim, dst_sizes, *group);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor grad = all_to_all_dim(grads[0], ctx->saved_data["dst_dim"].toInt(),
                                           sizes_of(ctx, "dst_sizes"), ctx->saved_data["src_dim"].toInt(),
                                           sizes_of(ctx, "src_sizes"), *group_of(ctx));
    return {grad, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

void check_sizes(const at::Tensor& x, int64_t dim, const dist::CommunicatorPtr& group,
                 const std::vector<int64_t>& sizes, const char* op) {
  TESSEL_CHECK(static_cast<int>(sizes.size()) == group->size(),
               "{} over group {}: got {} shard sizes for {} ranks (pass every rank's size, e.g. "
               "chunk_sizes(global, group->size()))",
               op, group->name(), sizes.size(), group->size());
  const int64_t mine = sizes[static_cast<size_t>(group->rank())];
  TESSEL_CHECK(x.size(dim) == mine,
               "{} over group {}: rank {} holds {} elements along dim {} but sizes[{}] is {}", op,
               group->name(), group->rank(), x.size(dim), dim, group->rank(), mine);
}

at::Tensor gather(const at::Tensor& x, int64_t dim, const dist::CommunicatorPtr& group,
                  const std::vector<int64_t>& sizes, bool reduce_grad, const char* op) {
  check_group(group, op);
  dim = wrap(x, dim, op);
  check_sizes(x, dim, group, sizes, op);
  return AllGatherAlong::apply(x, dim, group, sizes, reduce_grad);
}

}  // namespace

at::Tensor copy_to_group(const at::Tensor& x, const dist::CommunicatorPtr& group) {
  check_group(group, "copy_to_group");
  return CopyToGroup::apply(x, group);
}

at::Tensor reduce_from_group(const at::Tensor& x, const dist::CommunicatorPtr& group) {
  check_group(group, "reduce_from_group");
  return ReduceFromGroup::apply(x, group);
}

at::Tensor all_gather_along(const at::Tensor& x, int64_t dim, const dist::CommunicatorPtr& group,
                            const std::vector<int64_t>& sizes) {
  return gather(x, dim, group, sizes, /*reduce_grad=*/false, "all_gather_along");
}

at::Tensor all_gather_along_reduce_grad(const at::Tensor& x, int64_t dim,
                                        const dist::CommunicatorPtr& group,
                                        const std::vector<int64_t>& sizes) {
  return gather(x, dim, group, sizes, /*reduce_grad=*/true, "all_gather_along_reduce_grad");
}

at::Tensor reduce_scatter_along(const at::Tensor& x, int64_t dim, const dist::CommunicatorPtr& group) {
  check_group(group, "reduce_scatter_along");
  return ReduceScatterAlong::apply(x, wrap(x, dim, "reduce_scatter_along"), group);
}

at::Tensor split_along(const at::Tensor& x, int64_t dim, const dist::CommunicatorPtr& group) {
  check_group(group, "split_along");
  return SplitAlong::apply(x, wrap(x, dim, "split_along"), group);
}

at::Tensor all_to_all_along(const at::Tensor& x, int64_t src_dim, int64_t dst_dim,
                            const dist::CommunicatorPtr& group, const std::vector<int64_t>& src_sizes) {
  constexpr const char* op = "all_to_all_along";
  check_group(group, op);
  src_dim = wrap(x, src_dim, op);
  dst_dim = wrap(x, dst_dim, op);
  TESSEL_CHECK(src_dim != dst_dim,
               "{}: source and target dim are both {}; an all-to-all moves the shard to another dim", op,
               src_dim);
  check_sizes(x, src_dim, group, src_sizes, op);
  return AllToAllAlong::apply(x, src_dim, dst_dim, group, src_sizes);
}

}  // namespace tessel::tensor
