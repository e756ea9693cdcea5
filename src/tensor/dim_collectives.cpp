#include "tensor/dim_collectives.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace tessel::tensor {

namespace {

// x viewed as [A, n, B] around dim.
struct Around {
  int64_t before = 1;  // A
  int64_t after = 1;   // B
};

Around around(const at::Tensor& x, int64_t dim) {
  Around a;
  for (int64_t d = 0; d < dim; ++d) a.before *= x.size(d);
  for (int64_t d = dim + 1; d < x.dim(); ++d) a.after *= x.size(d);
  return a;
}

struct Split {
  std::vector<int64_t> sizes;
  std::vector<int64_t> offsets;
  int64_t total = 0;
  int64_t max = 0;
  bool even() const {
    return std::all_of(sizes.begin(), sizes.end(), [&](int64_t s) { return s == max; });
  }
};

Split describe(const std::vector<int64_t>& sizes, const dist::Communicator& group, const char* op) {
  TESSEL_CHECK(static_cast<int>(sizes.size()) == group.size(),
               "{} over group {}: got {} shard sizes for {} ranks", op, group.name(), sizes.size(),
               group.size());
  Split s;
  s.sizes = sizes;
  for (int64_t size : sizes) {
    TESSEL_CHECK(size >= 0, "{} over group {}: negative shard size {}", op, group.name(), size);
    s.offsets.push_back(s.total);
    s.total += size;
    s.max = std::max(s.max, size);
  }
  return s;
}

int64_t wrap_dim(const at::Tensor& x, int64_t dim, const char* op) {
  const int64_t n = x.dim();
  TESSEL_CHECK(dim >= -n && dim < n, "{}: dim {} is out of range for a tensor with {} dims", op, dim, n);
  return dim < 0 ? dim + n : dim;
}

std::vector<int64_t> with_size(const at::Tensor& x, int64_t dim, int64_t size) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape[static_cast<size_t>(dim)] = size;
  return shape;
}

}  // namespace

at::Tensor all_gather_dim(const at::Tensor& x, int64_t dim, dist::Communicator& group,
                          const std::vector<int64_t>& sizes) {
  constexpr const char* op = "all_gather_dim";
  dim = wrap_dim(x, dim, op);
  const Split split = describe(sizes, group, op);
  const int world = group.size();
  const int rank = group.rank();
  const int64_t mine = split.sizes[static_cast<size_t>(rank)];
  TESSEL_CHECK(x.size(dim) == mine,
               "{} over group {}: rank {} holds {} elements along dim {} but the shard sizes say {}",
               op, group.name(), rank, x.size(dim), dim, mine);
  if (world == 1) return x.contiguous();
  const Around a = around(x, dim);
  const auto out_shape = with_size(x, dim, split.total);
  // Same shape on every rank, so every rank skips together.
  if (a.before * split.max * a.after == 0) return at::empty(out_shape, x.options());

  const at::Tensor x3 = x.reshape({a.before, mine, a.after});
  at::Tensor in;
  if (mine == split.max && x3.is_contiguous()) {
    in = x3;
  } else {
    in = at::empty({a.before, split.max, a.after}, x.options());
    in.narrow(1, 0, mine).copy_(x3);
    // The padding is never read back; zero it so no uninitialised bytes travel.
    in.narrow(1, mine, split.max - mine).zero_();
  }
  at::Tensor out = at::empty({world, a.before, split.max, a.after}, x.options());
  group.all_gather_into(out, in);

  at::Tensor result;
  if (split.even()) {
    // [W, A, m, B] -> [A, W*m, B]: a view when A == 1, one copy otherwise.
    result = out.permute({1, 0, 2, 3}).reshape({a.before, split.total, a.after});
  } else {
    std::vector<at::Tensor> pieces;
    pieces.reserve(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) pieces.push_back(out[r].narrow(1, 0, split.sizes[static_cast<size_t>(r)]));
    result = at::cat(pieces, 1);
  }
  return result.contiguous().view(out_shape);
}

at::Tensor reduce_scatter_dim(const at::Tensor& x, int64_t dim, dist::Communicator& group,
                              const std::vector<int64_t>& sizes) {
  constexpr const char* op = "reduce_scatter_dim";
  dim = wrap_dim(x, dim, op);
  const Split split = describe(sizes, group, op);
  const int world = group.size();
  const int rank = group.rank();
  TESSEL_CHECK(x.size(dim) == split.total,
               "{} over group {}: the tensor has {} elements along dim {} but the shard sizes sum to {}",
               op, group.name(), x.size(dim), dim, split.total);
  if (world == 1) return x.contiguous();
  const int64_t mine = split.sizes[static_cast<size_t>(rank)];
  const Around a = around(x, dim);
  const auto out_shape = with_size(x, dim, mine);
  if (a.before * split.max * a.after == 0) return at::zeros(out_shape, x.options());

  const at::Tensor x3 = x.reshape({a.before, split.total, a.after});
  at::Tensor in;  // [W, A, m, B]: rank r's slice at in[r]
  if (split.even()) {
    // A view of x when A == 1 and x is contiguous, one copy otherwise.
    in = x3.view({a.before, world, split.max, a.after}).permute({1, 0, 2, 3}).contiguous();
  } else {
    in = at::empty({world, a.before, split.max, a.after}, x.options());
    for (int r = 0; r < world; ++r) {
      const auto i = static_cast<size_t>(r);
      at::Tensor slot = in[r];
      slot.narrow(1, 0, split.sizes[i]).copy_(x3.narrow(1, split.offsets[i], split.sizes[i]));
      slot.narrow(1, split.sizes[i], split.max - split.sizes[i]).zero_();
    }
  }
  at::Tensor out = at::empty({a.before, split.max, a.after}, x.options());
  group.reduce_scatter_from(out, in, dist::ReduceOp::Sum);
  return out.narrow(1, 0, mine).contiguous().view(out_shape);
}

at::Tensor all_reduce_sum(const at::Tensor& x, dist::Communicator& group) {
  at::Tensor out = x.clone(at::MemoryFormat::Contiguous);
  if (group.size() > 1 && out.numel() > 0) group.all_reduce(out, dist::ReduceOp::Sum);
  return out;
}

at::Tensor all_to_all_dim(const at::Tensor& x, int64_t src_dim, const std::vector<int64_t>& src_sizes,
                          int64_t dst_dim, const std::vector<int64_t>& dst_sizes,
                          dist::Communicator& group) {
  constexpr const char* op = "all_to_all_dim";
  src_dim = wrap_dim(x, src_dim, op);
  dst_dim = wrap_dim(x, dst_dim, op);
  TESSEL_CHECK(src_dim != dst_dim, "{} over group {}: source and target dim are both {}", op,
               group.name(), src_dim);
  const Split src = describe(src_sizes, group, op);
  const Split dst = describe(dst_sizes, group, op);
  const int world = group.size();
  const int rank = group.rank();
  const auto me = static_cast<size_t>(rank);
  TESSEL_CHECK(x.size(src_dim) == src.sizes[me],
               "{} over group {}: rank {} holds {} elements along dim {} but the shard sizes say {}",
               op, group.name(), rank, x.size(src_dim), src_dim, src.sizes[me]);
  TESSEL_CHECK(x.size(dst_dim) == dst.total,
               "{} over group {}: the tensor has {} elements along dim {} but the target shard sizes sum to {}",
               op, group.name(), x.size(dst_dim), dst_dim, dst.total);
  if (world == 1) return x.contiguous();

  std::vector<int64_t> out_shape = with_size(x, src_dim, src.total);
  out_shape[static_cast<size_t>(dst_dim)] = dst.sizes[me];
  // One piece per peer, padded to the largest source and target shard.
  std::vector<int64_t> buf_shape = with_size(x, src_dim, src.max);
  buf_shape[static_cast<size_t>(dst_dim)] = dst.max;
  buf_shape.insert(buf_shape.begin(), world);
  int64_t buf_numel = 1;
  for (int64_t s : buf_shape) buf_numel *= s;
  if (buf_numel == 0) return at::empty(out_shape, x.options());

  // Zero the padding (when there is any) so no uninitialised bytes travel.
  const bool padded = !src.even() || !dst.even();
  at::Tensor send = padded ? at::zeros(buf_shape, x.options()) : at::empty(buf_shape, x.options());
  for (int j = 0; j < world; ++j) {
    const auto i = static_cast<size_t>(j);
    send[j]
        .narrow(src_dim, 0, src.sizes[me])
        .narrow(dst_dim, 0, dst.sizes[i])
        .copy_(x.narrow(dst_dim, dst.offsets[i], dst.sizes[i]));
  }
  at::Tensor recv = at::empty(buf_shape, x.options());
  group.all_to_all(recv, send);

  std::vector<at::Tensor> pieces;
  pieces.reserve(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    pieces.push_back(recv[r]
                         .narrow(src_dim, 0, src.sizes[static_cast<size_t>(r)])
                         .narrow(dst_dim, 0, dst.sizes[me]));
  }
  return at::cat(pieces, src_dim);
}

}  // namespace tessel::tensor
