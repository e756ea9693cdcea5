#include "tensor/redistribute.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"
#include "tensor/autograd_collectives.h"
#include "tensor/chunking.h"

namespace tessel::tensor {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Replicate -> Partial: the sum over ranks must equal x, so rank 0 keeps it and
// the others hold zeros. The gradient of a Partial tensor is replicated (the
// full gradient on every rank) and so is a Replicate input's: identity.
struct ReplicateToPartial : torch::autograd::Function<ReplicateToPartial> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, bool keep) {
    return keep ? x.clone(at::MemoryFormat::Contiguous) : at::zeros_like(x, at::MemoryFormat::Contiguous);
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], at::Tensor()}; }
};

// Shard -> Partial: this rank's chunk in place, zeros elsewhere, so the sum over
// ranks is the full tensor. Padding's own backward (the chunk of the replicated
// gradient) is the right one, so plain autograd suffices.
at::Tensor zero_pad_chunk(const at::Tensor& x, int64_t dim, int64_t global, int64_t offset) {
  std::vector<int64_t> pad(static_cast<size_t>(2 * (x.dim() - dim)), 0);
  // Pairs run from the last dim backwards: dim's pair is the final one.
  pad[pad.size() - 2] = offset;
  pad[pad.size() - 1] = global - offset - x.size(dim);
  return at::constant_pad_nd(x, pad, 0);
}

}  // namespace

at::Tensor redistribute(const at::Tensor& x, const Layout& from_layout, const Layout& to_layout,
                        const dist::CommunicatorPtr& group, std::optional<int64_t> global_size,
                        GatheredGrad gathered_grad) {
  TESSEL_CHECK(group != nullptr, "redistribute {} -> {}: the communicator is null",
               from_layout.to_string(), to_layout.to_string());
  TESSEL_CHECK(x.defined(), "redistribute {} -> {} over group {}: the input tensor is undefined",
               from_layout.to_string(), to_layout.to_string(), group->name());
  const Layout from = from_layout.normalized(x.dim());
  const Layout to = to_layout.normalized(x.dim());
  const int world = group->size();
  const int rank = group->rank();
  const std::string what =
      fmt::format("redistribute {} -> {} over group {}", from.to_string(), to.to_string(), group->name());

  if (from.is_shard()) {
    const int64_t a = from.dim();
    TESSEL_CHECK(global_size.has_value(),
                 "{}: pass the global size along dim {} (shards may be uneven, so it cannot be "
                 "inferred from this rank's {} elements)",
                 what, a, x.size(a));
    const int64_t n = *global_size;
    TESSEL_CHECK(n >= 0, "{}: negative global size {}", what, n);
    TESSEL_CHECK(x.size(a) == chunk_size(n, world, rank),
                 "{}: rank {} holds {} elements along dim {}, but chunk {} of a global size {} over {} "
                 "ranks has {}",
                 what, rank, x.size(a), a, rank, n, world, chunk_size(n, world, rank));
    const std::vector<int64_t> sizes = chunk_sizes(n, world);
    if (to.is_replicate()) {
      return gathered_grad == GatheredGrad::Partial ? all_gather_along_reduce_grad(x, a, group, sizes)
                                                    : all_gather_along(x, a, group, sizes);
    }
    if (to.is_shard()) return to.dim() == a ? x : all_to_all_along(x, a, to.dim(), group, sizes);
    return zero_pad_chunk(x, a, n, chunk_offset(n, world, rank));
  }

  if (to.is_shard() && global_size.has_value()) {
    TESSEL_CHECK(x.size(to.dim()) == *global_size,
                 "{}: the input holds dim {} whole with {} elements, but the global size given is {}",
                 what, to.dim(), x.size(to.dim()), *global_size);
  }
  if (from.is_replicate()) {
    if (to.is_replicate()) return x;
    if (to.is_shard()) return split_along(x, to.dim(), group);
    return ReplicateToPartial::apply(x, rank == 0);
  }
  // from Partial
  if (to.is_replicate()) return reduce_from_group(x, group);
  if (to.is_shard()) return reduce_scatter_along(x, to.dim(), group);
  return x;
}

}  // namespace tessel::tensor
