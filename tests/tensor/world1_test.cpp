// With one rank every collective and every redistribution is an identity, in
// value and in gradient; bad arguments are reported before any communication.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "dist/communicator.h"
#include "tensor/autograd_collectives.h"
#include "tensor/redistribute.h"
#include "tensor/tensor_reference.h"

namespace tessel::tensor {
namespace {

using ref::expect_close;
using ref::seeded;

dist::CommunicatorPtr solo() {
  auto g = dist::world();
  EXPECT_EQ(g->size(), 1) << "the unit-test binary runs without mpirun";
  return g;
}

void expect_identity(const std::function<at::Tensor(const at::Tensor&)>& op, const std::string& what) {
  const at::Tensor x = seeded({5, 7, 2}, 1).requires_grad_();
  const at::Tensor y = op(x);
  expect_close(y, x.detach(), what + " value");
  const at::Tensor g = seeded({5, 7, 2}, 2);
  y.backward(g);
  expect_close(x.grad(), g, what + " grad");
}

TEST(World1, CollectivesAreIdentities) {
  const auto g = solo();
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const int64_t n = std::vector<int64_t>{5, 7, 2, 2}[static_cast<size_t>(dim < 0 ? 3 : dim)];
    expect_identity([&](const at::Tensor& x) { return copy_to_group(x, g); }, "copy_to_group");
    expect_identity([&](const at::Tensor& x) { return reduce_from_group(x, g); }, "reduce_from_group");
    expect_identity([&](const at::Tensor& x) { return all_gather_along(x, dim, g, {n}); },
                    "all_gather_along");
    expect_identity([&](const at::Tensor& x) { return all_gather_along_reduce_grad(x, dim, g, {n}); },
                    "all_gather_along_reduce_grad");
    expect_identity([&](const at::Tensor& x) { return reduce_scatter_along(x, dim, g); },
                    "reduce_scatter_along");
    expect_identity([&](const at::Tensor& x) { return split_along(x, dim, g); }, "split_along");
    const int64_t other = dim == 0 ? 1 : 0;
    expect_identity([&](const at::Tensor& x) { return all_to_all_along(x, dim, other, g, {n}); },
                    "all_to_all_along");
  }
}

TEST(World1, RedistributeIsIdentity) {
  const auto g = solo();
  const std::vector<Layout> layouts{Layout::replicate(), Layout::shard(0), Layout::shard(1),
                                    Layout::shard(-1), Layout::partial()};
  const std::vector<int64_t> shape{5, 7, 2};
  for (const Layout& from : layouts) {
    for (const Layout& to : layouts) {
      for (GatheredGrad gg : {GatheredGrad::Partial, GatheredGrad::Replicated}) {
        SCOPED_TRACE(from.to_string() + " -> " + to.to_string());
        std::optional<int64_t> global;
        if (from.is_shard()) global = shape[static_cast<size_t>(from.normalized(3).dim())];
        expect_identity([&](const at::Tensor& x) { return redistribute(x, from, to, g, global, gg); },
                        "redistribute");
      }
    }
  }
}

TEST(World1, ReportsBadArguments) {
  const auto g = solo();
  const at::Tensor x = seeded({5, 3}, 1);
  // From Shard without the global size, or with one this rank's shard contradicts.
  EXPECT_THROW(redistribute(x, Layout::shard(0), Layout::replicate(), g), Error);
  EXPECT_THROW(redistribute(x, Layout::shard(0), Layout::replicate(), g, 6), Error);
  EXPECT_THROW(redistribute(x, Layout::replicate(), Layout::shard(1), g, 4), Error);
  EXPECT_THROW(redistribute(x, Layout::shard(2), Layout::replicate(), g, 5), Error);
  EXPECT_THROW(redistribute(x, Layout::replicate(), Layout::partial(), nullptr), Error);
  EXPECT_THROW(all_gather_along(x, 0, g, {5, 0}), Error);  // two sizes for one rank
  EXPECT_THROW(all_gather_along(x, 0, g, {4}), Error);
  EXPECT_THROW(all_gather_along(x, 2, g, {5}), Error);
  EXPECT_THROW(all_to_all_along(x, 0, 0, g, {5}), Error);
  EXPECT_THROW(split_along(x, -3, g), Error);
  try {
    redistribute(x, Layout::shard(0), Layout::replicate(), g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("global size"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessel::tensor
