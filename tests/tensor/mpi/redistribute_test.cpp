// Every redistribute pair (Replicate, Shard(d) for each d and d = -1, Partial)
// at 2, 3 and 4 ranks, on the world and on parity sub-groups. Values and
// gradients are checked against plain libtorch math every rank can do alone:
// the logical tensor T is seeded, a Partial input's pieces are seeded per rank
// (T = their sum), shards are cut by torch.chunk. Upstream gradients are
// distinct per rank where the output is Replicate or Partial, so a backward
// that reduced when it should not (or the reverse) is caught.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "dist/communicator.h"
#include "tensor/mpi/groups.h"
#include "tensor/redistribute.h"
#include "tensor/tensor_reference.h"

namespace tessel::tensor {
namespace {

using ref::chunk_ref;
using ref::expect_close;
using ref::seeded;
using Shape = std::vector<int64_t>;

struct Case {
  dist::CommunicatorPtr group;
  Shape shape;
  Layout from = Layout::replicate();
  Layout to = Layout::replicate();
  GatheredGrad gathered_grad = GatheredGrad::Partial;
  at::ScalarType dtype = at::kFloat;
  uint64_t seed = 0;
};

void check(const Case& c) {
  const int world = c.group->size();
  const int r = c.group->rank();
  const auto me = static_cast<size_t>(r);
  const auto ndim = static_cast<int64_t>(c.shape.size());
  const Layout from = c.from.normalized(ndim);
  const Layout to = c.to.normalized(ndim);

  std::vector<at::Tensor> parts, ups;
  for (int s = 0; s < world; ++s) {
    parts.push_back(seeded(c.shape, c.seed + 10 + static_cast<uint64_t>(s), c.dtype));
    ups.push_back(seeded(c.shape, c.seed + 100 + static_cast<uint64_t>(s), c.dtype));
  }
  at::Tensor ups_sum = ups[0].clone();
  for (int s = 1; s < world; ++s) ups_sum += ups[static_cast<size_t>(s)];
  const at::Tensor full_grad = seeded(c.shape, c.seed + 1, c.dtype);
  at::Tensor logical;  // T
  at::Tensor input;
  std::optional<int64_t> global;
  if (from.is_partial()) {
    logical = parts[0].clone();
    for (int s = 1; s < world; ++s) logical += parts[static_cast<size_t>(s)];
    input = parts[me];
  } else {
    logical = seeded(c.shape, c.seed, c.dtype);
    input = from.is_shard() ? chunk_ref(logical, from.dim(), world, r) : logical;
  }
  if (from.is_shard()) {
    global = c.shape[static_cast<size_t>(from.dim())];
  } else if (to.is_shard()) {
    global = c.shape[static_cast<size_t>(to.dim())];  // optional here; checked when given
  }

  const at::Tensor x = input.detach().clone().requires_grad_();
  const at::Tensor y = redistribute(x, c.from, c.to, c.group, global, c.gathered_grad);

  // Forward value, and the upstream gradient this rank feeds back.
  at::Tensor upstream;
  if (to.is_replicate()) {
    expect_close(y, logical, "value");
    upstream = ups[me];
  } else if (to.is_shard()) {
    expect_close(y, chunk_ref(logical, to.dim(), world, r), "value");
    upstream = chunk_ref(full_grad, to.dim(), world, r);
  } else {
    // Partial: the documented pieces, which must also sum to T.
    at::Tensor expected;
    if (from.is_partial()) {
      expected = parts[me];
    } else if (from.is_replicate()) {
      expected = r == 0 ? logical : at::zeros_like(logical);
    } else {
      expected = at::zeros_like(logical);
      const at::Tensor mine = chunk_ref(logical, from.dim(), world, r);
      int64_t offset = 0;
      for (int s = 0; s < r; ++s) offset += chunk_ref(logical, from.dim(), world, s).size(from.dim());
      expected.narrow(from.dim(), offset, mine.size(from.dim())).copy_(mine);
    }
    expect_close(y, expected, "partial pieces");
    const at::Tensor summed = y.detach().clone();
    if (world > 1 && summed.numel() > 0) c.group->all_reduce(summed);
    expect_close(summed, logical, "partial pieces sum");
    upstream = ups[me];
  }
  y.backward(upstream);

  // The adjoint, per the table in redistribute.h.
  at::Tensor expected_grad;
  if (from.is_shard()) {
    const int64_t a = from.dim();
    if (to.is_replicate()) {
      expected_grad = chunk_ref(c.gathered_grad == GatheredGrad::Partial ? ups_sum : ups[me], a, world, r);
    } else if (to.is_shard()) {
      expected_grad = chunk_ref(full_grad, a, world, r);
    } else {
      expected_grad = chunk_ref(ups[me], a, world, r);
    }
  } else {
    // Replicate and Partial inputs get the full gradient on every rank.
    expected_grad = to.is_shard() ? full_grad : ups[me];
  }
  expect_close(x.grad(), expected_grad, "grad");
}

std::string describe(const Case& c) {
  return ::testing::PrintToString(c.group->name()) + " " + ref::shape_str(c.shape) + " " +
         c.from.to_string() + " -> " + c.to.to_string() +
         (c.gathered_grad == GatheredGrad::Partial ? "" : " (replicated grad)") +
         (c.dtype == at::kFloat ? "" : " bf16");
}

std::vector<Layout> layouts_for(int64_t ndim) {
  std::vector<Layout> layouts{Layout::replicate(), Layout::partial(), Layout::shard(-1)};
  for (int64_t d = 0; d < ndim; ++d) layouts.push_back(Layout::shard(d));
  return layouts;
}

TEST(RedistributeMpi, EveryPairFp32) {
  uint64_t seed = 10000;
  int cases = 0;
  for (const auto& g : ref::groups()) {
    for (const Shape& shape : {Shape{5, 7, 2}, Shape{4, 6}, Shape{3}}) {
      const auto layouts = layouts_for(static_cast<int64_t>(shape.size()));
      for (const Layout& from : layouts) {
        for (const Layout& to : layouts) {
          for (GatheredGrad gg : {GatheredGrad::Partial, GatheredGrad::Replicated}) {
            // The choice matters only for Shard -> Replicate.
            if (gg == GatheredGrad::Replicated && !(from.is_shard() && to.is_replicate())) continue;
            Case c{g, shape, from, to, gg, at::kFloat, seed += 1000};
            SCOPED_TRACE(describe(c));
            check(c);
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 100);
}

TEST(RedistributeMpi, EveryPairBf16) {
  uint64_t seed = 90000;
  const Shape shape{5, 7, 2};
  for (const Layout& from : layouts_for(3)) {
    for (const Layout& to : layouts_for(3)) {
      Case c{dist::world(), shape, from, to, GatheredGrad::Partial, at::kBFloat16, seed += 1000};
      SCOPED_TRACE(describe(c));
      check(c);
    }
  }
}

// Round trips come back to the input, value and gradient, when the gathered
// output's gradient kind matches how the next step treats it.
TEST(RedistributeMpi, RoundTrips) {
  const auto g = dist::world();
  const int world = g->size();
  const at::Tensor full = seeded({5, 7}, 7);
  const at::Tensor shard = chunk_ref(full, 0, world, g->rank()).clone().requires_grad_();
  // Shard -> Replicate -> Shard: the split's gradient is replicated.
  at::Tensor back = redistribute(redistribute(shard, Layout::shard(0), Layout::replicate(), g, 5,
                                              GatheredGrad::Replicated),
                                 Layout::replicate(), Layout::shard(0), g);
  expect_close(back, shard.detach(), "S->R->S value");
  const at::Tensor up = seeded(shard.sizes().vec(), 70 + static_cast<uint64_t>(g->rank()));
  back.backward(up);
  expect_close(shard.grad(), up, "S->R->S grad");
  // Shard(0) -> Shard(1) -> Shard(0).
  const at::Tensor s2 = chunk_ref(full, 0, world, g->rank()).clone().requires_grad_();
  back = redistribute(redistribute(s2, Layout::shard(0), Layout::shard(1), g, 5), Layout::shard(1),
                      Layout::shard(0), g, 7);
  expect_close(back, s2.detach(), "S0->S1->S0 value");
  back.backward(up);
  expect_close(s2.grad(), up, "S0->S1->S0 grad");
}

}  // namespace
}  // namespace tessel::tensor
