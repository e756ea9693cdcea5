// Expert parallelism's token exchange over real ranks against the sparse MoE
// block computed whole on one rank: every rank builds the same block (same
// seed, all E experts) but routes its own tokens (a different number per
// rank, one rank with none at all in one case, and routing pushed onto few
// experts so some experts get no tokens from some ranks). With the experts
// split over the group (rank j runs experts [j*E/ep, (j+1)*E/ep) only), each
// rank must get the block's output and input gradient for its tokens, the
// router's gradient for its tokens, and each local expert's gradient must be
// the sum over ranks of that expert's gradient in the whole-block reference.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "dist/communicator.h"
#include "nn/sparse_moe.h"
#include "parallel/expert_dispatch.h"

namespace tessel::parallel {
namespace {

constexpr int64_t kExperts = 8, kHidden = 6;

std::shared_ptr<nn::SparseMoeBlock> make_block(bool normalize, bool skewed) {
  nn::SparseMoeOptions o;
  o.hidden_size = kHidden;
  o.intermediate_size = 5;
  o.num_experts = kExperts;
  o.top_k = 2;
  o.normalize_top_k = normalize;
  auto block = std::make_shared<nn::SparseMoeBlock>(o, at::TensorOptions().dtype(at::kDouble));
  nn::assign_module_paths(*block);
  auto gen = at::detail::createCPUGenerator(11);
  at::NoGradGuard no_grad;
  for (auto& p : block->named_parameters()) p.value().copy_(at::normal(0.0, 0.5, p.value().sizes(), gen));
  // Skewed: experts 1, 2, 5 get router rows pointing away from the inputs'
  // mean direction, so they are rarely or never chosen.
  if (skewed) {
    at::Tensor w = block->named_parameters()["gate.weight"];
    for (int64_t e : {1, 2, 5}) w[e].fill_(-2.0);
    for (int64_t e : {0, 3}) w[e].fill_(1.0);
  }
  return block;
}

at::Tensor rank_tokens(int rank, int64_t n) {
  auto gen = at::detail::createCPUGenerator(100 + static_cast<uint64_t>(rank));
  return (at::randn({n, kHidden}, gen, at::TensorOptions().dtype(at::kDouble)) + 0.3).set_requires_grad(true);
}

struct DispatchCase {
  std::string name;
  bool normalize;
  bool skewed;
  bool rank1_empty;
};

void check_case(const DispatchCase& c) {
  dist::CommunicatorPtr w = dist::world();
  const int ep = w->size(), me = w->rank();
  const int64_t local = kExperts / ep;
  const int64_t n = (c.rank1_empty && me == 1) ? 0 : 3 + 2 * me;

  // Reference: the whole block on this rank's tokens.
  auto ref = make_block(c.normalize, c.skewed);
  const at::Tensor x_ref = rank_tokens(me, n);
  const at::Tensor out_ref = ref->call(nn::Tensors{x_ref.view({1, n, kHidden})})[0];
  const at::Tensor dout = at::cos(at::arange(n * kHidden, at::TensorOptions().dtype(at::kDouble))).view({1, n, kHidden});
  (out_ref * dout).sum().backward();

  // Expert parallel: same router, only the local experts run here.
  auto blk = make_block(c.normalize, c.skewed);
  const at::Tensor x = rank_tokens(me, n);
  const at::Tensor logits = (*blk->gate()).call(x);
  const auto routing = nn::route_tokens(logits, 2, c.normalize, x.scalar_type());
  ExpertDispatchStats stats;
  const at::Tensor out = dispatch_to_experts(
      x, routing.chosen, routing.weights, kExperts, w,
      [&](int64_t e, const at::Tensor& rows) {
        return (*blk->experts())[static_cast<size_t>(me * local + e)]->call(rows);
      },
      &stats);
  (out.view({1, n, kHidden}) * dout).sum().backward();

  const double tol = 1e-12;
  EXPECT_TRUE(at::allclose(out, out_ref.view({n, kHidden}), tol, tol)) << c.name;
  EXPECT_TRUE(at::allclose(x.grad(), x_ref.grad(), tol, tol)) << c.name;
  auto p = blk->named_parameters();
  auto q = ref->named_parameters();
  EXPECT_TRUE(at::allclose(p["gate.weight"].grad(), q["gate.weight"].grad(), tol, tol)) << c.name;
  for (int64_t e = 0; e < kExperts; ++e) {
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      const std::string name = "experts." + std::to_string(e) + "." + proj + ".weight";
      at::Tensor summed = q[name].grad().clone();
      w->all_reduce(summed);  // every rank's tokens' contribution to expert e
      const bool mine = e / local == me;
      if (mine) {
        ASSERT_TRUE(p[name].grad().defined()) << c.name << " " << name;
        EXPECT_TRUE(at::allclose(p[name].grad(), summed, tol, tol)) << c.name << " " << name;
      } else {
        EXPECT_FALSE(p[name].grad().defined()) << c.name << " " << name << " ran on the wrong rank";
      }
    }
  }
  // Some rows must actually have crossed ranks, or the exchange went untested.
  int64_t moved = stats.rows_sent;
  at::Tensor total = at::tensor({moved}, at::kLong);
  w->all_reduce(total);
  EXPECT_GT(total.item<int64_t>(), 0) << c.name;
}

TEST(ExpertDispatch, MatchesTheWholeBlockOnEveryRank) {
  for (const DispatchCase& c :
       {DispatchCase{"plain", false, false, false}, DispatchCase{"normalized", true, false, false},
        DispatchCase{"skewed", true, true, false}, DispatchCase{"rank1_without_tokens", false, true, true}}) {
    check_case(c);
  }
}

// Skewed routing really leaves experts without tokens from some rank (the
// case the exchange's zero counts must survive).
TEST(ExpertDispatch, SkewedRoutingLeavesExpertsEmpty) {
  auto blk = make_block(true, true);
  at::NoGradGuard no_grad;
  const at::Tensor x = rank_tokens(dist::world()->rank(), 5);
  const auto routing = nn::route_tokens((*blk->gate()).call(x), 2, true, x.scalar_type());
  const at::Tensor used = at::bincount(routing.chosen.flatten(), {}, kExperts);
  EXPECT_GT((used == 0).sum().item<int64_t>(), 0);
}

}  // namespace
}  // namespace tessel::parallel
