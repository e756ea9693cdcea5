// Global gradient norm over real MPI ranks: shards are counted once,
// replicated tensors are not over-counted; gradients summed through fp64
// chunks count every element once.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>

#include "dist/communicator.h"
#include "optim/grad_norm.h"

namespace tessel::optim {
namespace {

TEST(GradNorm, ShardedAndReplicatedGradientsCountedOnce) {
  auto world = dist::world();
  const int w = world->size(), r = world->rank();
  // A sharded tensor: rank r holds rows [r*3, r*3+3) of a (3w x 2) tensor of
  // values i+1 (i = flat index); a replicated tensor of 5 elements = 2.0 on all ranks.
  at::Tensor sharded = at::arange(r * 6, r * 6 + 6, at::kFloat).add_(1).reshape({3, 2});
  at::Tensor replicated = at::full({5}, 2.0f);
  double expected_sq = 0;
  for (int i = 1; i <= 6 * w; ++i) expected_sq += double(i) * i;
  expected_sq += 5 * 4.0;
  std::vector<GradShardSet> sets{{{sharded}, {world}}, {{replicated}, {}}};
  EXPECT_NEAR(global_grad_norm(sets), std::sqrt(expected_sq), 1e-9 * std::sqrt(expected_sq));
}

TEST(GradNorm, ClipScalesEveryShardByTheGlobalFactor) {
  auto world = dist::world();
  at::Tensor g = at::full({4}, 3.0f);  // global: 4w elements of 3 -> norm 6 sqrt(w)
  std::vector<GradShardSet> sets{{{g}, {world}}};
  const double norm = clip_grad_norm(sets, 1.0);
  EXPECT_NEAR(norm, 6.0 * std::sqrt(world->size()), 1e-9);
  const double after = global_grad_norm(sets);
  EXPECT_NEAR(after, 1.0, 1e-5);
}

TEST(GradNorm, GradientsConvertedInChunksCountEveryElementOnce) {
  // bf16 and non-contiguous fp32 gradients take the fp64 chunks (more than
  // one chunk each), beside an fp32 one read in place: integer values, so the
  // sum of squares is exact in fp64 and known here by counting.
  constexpr int64_t kElements = (int64_t{1} << 18) * 2 + 12342;  // a multiple of 5
  const at::Tensor values = at::arange(kElements, at::kLong).remainder(7).sub_(3);
  const at::Tensor bf16 = values.to(at::kBFloat16);
  const at::Tensor strided = values.to(at::kFloat).reshape({-1, 5}).t();  // 5 x N/5, not contiguous
  const at::Tensor in_place = at::full({10}, 2.0f);
  ASSERT_FALSE(strided.is_contiguous());
  double one_copy = 0.0;
  const auto* v = values.data_ptr<int64_t>();
  for (int64_t i = 0; i < kElements; ++i) one_copy += static_cast<double>(v[i] * v[i]);
  const double expected_sq = 2 * one_copy + 10 * 4.0;
  std::vector<GradShardSet> sets{{{bf16, in_place, strided}, {}}};
  EXPECT_DOUBLE_EQ(global_grad_norm(sets), std::sqrt(expected_sq));
}

}  // namespace
}  // namespace tessel::optim
