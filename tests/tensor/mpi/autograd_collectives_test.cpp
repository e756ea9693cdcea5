// Every autograd collective at 2, 3 and 4 ranks, on the world and on parity
// sub-groups, with shapes whose dims (5, 7, 2) leave short and empty shards.
// Each rank rebuilds every rank's tensors from seeds and computes values and
// gradients with plain libtorch ops (shards cut by torch.chunk). Only EXPECT_*
// here: a rank that returned early would leave its peers waiting in a collective.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "dist/communicator.h"
#include "tensor/autograd_collectives.h"
#include "tensor/mpi/groups.h"
#include "tensor/tensor_reference.h"

namespace tessel::tensor {
namespace {

using ref::chunk_ref;
using ref::expect_close;
using ref::seeded;
using Shape = std::vector<int64_t>;

std::vector<at::Tensor> per_rank(const Shape& shape, uint64_t seed, int world, at::ScalarType dt) {
  std::vector<at::Tensor> v;
  for (int s = 0; s < world; ++s) v.push_back(seeded(shape, seed + static_cast<uint64_t>(s), dt));
  return v;
}

at::Tensor sum(const std::vector<at::Tensor>& v) {
  at::Tensor total = v[0].clone();
  for (size_t i = 1; i < v.size(); ++i) total += v[i];
  return total;
}

// Every rank's extent along dim, as torch.chunk cuts it.
std::vector<int64_t> sizes_ref(const at::Tensor& full, int64_t dim, int world) {
  std::vector<int64_t> sizes;
  for (int s = 0; s < world; ++s) sizes.push_back(chunk_ref(full, dim, world, s).size(dim));
  return sizes;
}

at::Tensor leaf(const at::Tensor& t) { return t.detach().clone().requires_grad_(); }

// A leaf with the same values whose memory is not contiguous (for 2-D and up).
at::Tensor strided_leaf(const at::Tensor& t) {
  if (t.dim() < 2) return leaf(t);
  return t.transpose(0, 1).contiguous().transpose(0, 1).detach().requires_grad_();
}

void check_collectives(const dist::CommunicatorPtr& g, const Shape& shape, int64_t dim,
                       at::ScalarType dt, bool strided, uint64_t seed) {
  const int world = g->size();
  const int r = g->rank();
  const auto make_leaf = strided ? strided_leaf : leaf;
  const at::Tensor full = seeded(shape, seed, dt);
  const at::Tensor full_grad = seeded(shape, seed + 1, dt);
  const std::vector<at::Tensor> ups = per_rank(shape, seed + 100, world, dt);  // upstream grads
  const std::vector<at::Tensor> parts = per_rank(shape, seed + 200, world, dt);
  const std::vector<int64_t> sizes = sizes_ref(full, dim, world);

  {  // f: identity; grad = sum of every rank's upstream grad
    const at::Tensor x = make_leaf(full);
    const at::Tensor y = copy_to_group(x, g);
    expect_close(y, full, "copy_to_group value");
    y.backward(ups[static_cast<size_t>(r)]);
    expect_close(x.grad(), sum(ups), "copy_to_group grad");
  }
  {  // g: sum of partials; grad passes through
    const at::Tensor x = make_leaf(parts[static_cast<size_t>(r)]);
    const at::Tensor y = reduce_from_group(x, g);
    expect_close(y, sum(parts), "reduce_from_group value");
    y.backward(ups[static_cast<size_t>(r)]);
    expect_close(x.grad(), ups[static_cast<size_t>(r)], "reduce_from_group grad");
  }
  {  // all-gather, replicated output grad: own chunk of own upstream grad
    const at::Tensor x = make_leaf(chunk_ref(full, dim, world, r));
    const at::Tensor y = all_gather_along(x, dim, g, sizes);
    expect_close(y, full, "all_gather_along value");
    y.backward(ups[static_cast<size_t>(r)]);
    expect_close(x.grad(), chunk_ref(ups[static_cast<size_t>(r)], dim, world, r), "all_gather_along grad");
  }
  {  // all-gather, partial output grad: own chunk of the sum of upstream grads
    const at::Tensor x = make_leaf(chunk_ref(full, dim, world, r));
    const at::Tensor y = all_gather_along_reduce_grad(x, dim, g, sizes);
    expect_close(y, full, "all_gather_along_reduce_grad value");
    y.backward(ups[static_cast<size_t>(r)]);
    expect_close(x.grad(), chunk_ref(sum(ups), dim, world, r), "all_gather_along_reduce_grad grad");
  }
  {  // reduce-scatter of partials; grad = all shard grads gathered
    const at::Tensor x = make_leaf(parts[static_cast<size_t>(r)]);
    const at::Tensor y = reduce_scatter_along(x, dim, g);
    expect_close(y, chunk_ref(sum(parts), dim, world, r), "reduce_scatter_along value");
    y.backward(chunk_ref(full_grad, dim, world, r));
    expect_close(x.grad(), full_grad, "reduce_scatter_along grad");
  }
  {  // local split; grad = all shard grads gathered
    const at::Tensor x = make_leaf(full);
    const at::Tensor y = split_along(x, dim, g);
    expect_close(y, chunk_ref(full, dim, world, r), "split_along value");
    y.backward(chunk_ref(full_grad, dim, world, r));
    expect_close(x.grad(), full_grad, "split_along grad");
  }
}

void check_all_to_all(const dist::CommunicatorPtr& g, const Shape& shape, int64_t src, int64_t dst,
                      at::ScalarType dt, bool strided, uint64_t seed) {
  const int world = g->size();
  const int r = g->rank();
  const at::Tensor full = seeded(shape, seed, dt);
  const at::Tensor full_grad = seeded(shape, seed + 1, dt);
  const at::Tensor x = (strided ? strided_leaf : leaf)(chunk_ref(full, src, world, r));
  const at::Tensor y = all_to_all_along(x, src, dst, g, sizes_ref(full, src, world));
  expect_close(y, chunk_ref(full, dst, world, r), "all_to_all_along value");
  y.backward(chunk_ref(full_grad, dst, world, r));
  expect_close(x.grad(), chunk_ref(full_grad, src, world, r), "all_to_all_along grad");
}

const std::vector<Shape> kShapes{{5, 7, 2}, {2, 5}, {7}, {4, 6}};

TEST(AutogradCollectivesMpi, Fp32EveryShapeDimAndGroup) {
  uint64_t seed = 1000;
  for (const auto& g : ref::groups()) {
    for (const Shape& shape : kShapes) {
      const auto ndim = static_cast<int64_t>(shape.size());
      for (int64_t dim = -1; dim < ndim; ++dim) {
        for (bool strided : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "group " << g->name() << " shape " << ref::shape_str(shape)
                                            << " dim " << dim << (strided ? " strided" : ""));
          check_collectives(g, shape, dim, at::kFloat, strided, seed += 1000);
        }
      }
    }
  }
}

TEST(AutogradCollectivesMpi, Bf16) {
  SCOPED_TRACE("bf16 [5,7,2] dim 1");
  check_collectives(dist::world(), {5, 7, 2}, 1, at::kBFloat16, false, 77);
  check_all_to_all(dist::world(), {5, 7, 2}, 0, 2, at::kBFloat16, false, 78);
}

TEST(AutogradCollectivesMpi, AllToAllEveryDimPair) {
  uint64_t seed = 5000;
  for (const auto& g : ref::groups()) {
    for (const Shape& shape : {Shape{5, 7, 2}, Shape{4, 6}, Shape{2, 3, 4, 5}}) {
      const auto ndim = static_cast<int64_t>(shape.size());
      for (int64_t src = 0; src < ndim; ++src) {
        for (int64_t dst = 0; dst < ndim; ++dst) {
          if (src == dst) continue;
          for (bool strided : {false, true}) {
            SCOPED_TRACE(::testing::Message() << "group " << g->name() << " shape "
                                              << ref::shape_str(shape) << " " << src << " -> " << dst
                                              << (strided ? " strided" : ""));
            check_all_to_all(g, shape, src, dst, at::kFloat, strided, seed += 10);
          }
        }
      }
    }
  }
  // Negative dims name the same dims.
  check_all_to_all(dist::world(), {5, 7, 2}, -1, -3, at::kFloat, false, 99);
}

// The communication each op promises: the local ones send nothing.
TEST(AutogradCollectivesMpi, CollectiveCounts) {
  const auto g = dist::world();
  const int world = g->size();
  const at::Tensor full = seeded({6, 4}, 3);
  const std::vector<int64_t> sizes = sizes_ref(full, 0, world);
  auto count = [&](dist::CollectiveKind k) { return g->counters().count(k); };

  g->reset_counters();
  at::Tensor x = leaf(full);
  at::Tensor y = split_along(x, 0, g);
  EXPECT_EQ(count(dist::CollectiveKind::AllGather), 0) << "split forward is local";
  y.backward(at::ones_like(y));
  EXPECT_EQ(count(dist::CollectiveKind::AllGather), 1) << "split backward all-gathers";

  g->reset_counters();
  x = leaf(chunk_ref(full, 0, world, g->rank()));
  y = all_gather_along(x, 0, g, sizes);
  y.backward(at::ones_like(y));
  EXPECT_EQ(count(dist::CollectiveKind::AllGather), 1);
  EXPECT_EQ(count(dist::CollectiveKind::ReduceScatter), 0) << "replicated grad: backward is local";

  g->reset_counters();
  x = leaf(chunk_ref(full, 0, world, g->rank()));
  y = all_gather_along_reduce_grad(x, 0, g, sizes);
  y.backward(at::ones_like(y));
  EXPECT_EQ(count(dist::CollectiveKind::AllGather), 1);
  EXPECT_EQ(count(dist::CollectiveKind::ReduceScatter), 1);

  g->reset_counters();
  x = leaf(full);
  y = copy_to_group(x, g);
  EXPECT_EQ(count(dist::CollectiveKind::AllReduce), 0);
  y.backward(at::ones_like(y));
  EXPECT_EQ(count(dist::CollectiveKind::AllReduce), 1);
}

}  // namespace
}  // namespace tessel::tensor
