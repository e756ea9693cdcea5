// Context parallelism in one process: which chunks of a row each cp rank
// holds (written out by hand), cutting and joining rows, and the ring
// attention on a group of one, which must be causal_attention exactly,
// gradients included. The multi-rank ring is tests/parallel/mpi.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "dist/communicator.h"
#include "nn/attention.h"
#include "parallel/load_balanced_chunks.h"
#include "parallel/ring_attention.h"

namespace tessel::parallel {
namespace {

TEST(LoadBalancedChunks, EachRankHoldsOneEarlyAndOneLateChunk) {
  // cp 2: 4 chunks, rank 0 holds 0 and 3, rank 1 holds 1 and 2.
  EXPECT_EQ(load_balanced_chunk(2, 0, 0), 0);
  EXPECT_EQ(load_balanced_chunk(2, 0, 1), 3);
  EXPECT_EQ(load_balanced_chunk(2, 1, 0), 1);
  EXPECT_EQ(load_balanced_chunk(2, 1, 1), 2);
  // cp 4: rank 2 holds chunks 2 and 5.
  EXPECT_EQ(load_balanced_chunk(4, 2, 0), 2);
  EXPECT_EQ(load_balanced_chunk(4, 2, 1), 5);

  const at::Tensor row = at::arange(16, at::kLong).view({1, 16});
  EXPECT_TRUE(at::equal(take_load_balanced_chunks(row, 1, 2, 0), at::tensor({0, 1, 2, 3, 12, 13, 14, 15}, at::kLong).view({1, 8})));
  EXPECT_TRUE(at::equal(take_load_balanced_chunks(row, 1, 2, 1), at::tensor({4, 5, 6, 7, 8, 9, 10, 11}, at::kLong).view({1, 8})));
  EXPECT_TRUE(at::equal(take_load_balanced_chunks(row, 1, 4, 3), at::tensor({6, 7, 8, 9}, at::kLong).view({1, 4})));
  for (int cp : {1, 2, 4, 8}) {
    std::vector<at::Tensor> pieces;
    for (int r = 0; r < cp; ++r) pieces.push_back(take_load_balanced_chunks(row, -1, cp, r));
    EXPECT_TRUE(at::equal(join_load_balanced_chunks(pieces, -1), row)) << "cp " << cp;
  }
  try {
    take_load_balanced_chunks(at::zeros({2, 10}), 1, 4, 0);
    FAIL() << "10 tokens do not cut into 8 chunks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 8"), std::string::npos) << e.what();
  }
}

TEST(RingAttention, OnOneRankIsCausalAttention) {
  at::Generator g = at::detail::createCPUGenerator(7);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q0 = at::randn({2, 4, 10, 6}, g, f64), k0 = at::randn({2, 2, 10, 6}, g, f64);
  const at::Tensor v0 = at::randn({2, 2, 10, 6}, g, f64), dout = at::randn({2, 4, 10, 6}, g, f64);
  const at::Tensor documents = at::tensor({0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 5, 5, 5, 5, 5, 5, -1, -1, -1, -1}, at::kLong).view({2, 10});
  for (bool with_documents : {false, true}) {
    const at::Tensor docs = with_documents ? documents : at::Tensor();
    at::Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
    const at::Tensor ref = nn::causal_attention(q, k, v, 0.4, 3, 1.5, docs);
    (ref * dout).sum().backward();
    at::Tensor rq = q0.clone().requires_grad_(), rk = k0.clone().requires_grad_(), rv = v0.clone().requires_grad_();
    const at::Tensor out = ring_attention(rq, rk, rv, docs, dist::world(), RingAttentionOptions{0.4, 3, 1.5, nullptr});
    (out * dout).sum().backward();
    EXPECT_TRUE(at::allclose(out, ref, 1e-12, 1e-12)) << with_documents;
    EXPECT_TRUE(at::allclose(rq.grad(), q.grad(), 1e-11, 1e-12)) << with_documents;
    EXPECT_TRUE(at::allclose(rk.grad(), k.grad(), 1e-11, 1e-12)) << with_documents;
    EXPECT_TRUE(at::allclose(rv.grad(), v.grad(), 1e-11, 1e-12)) << with_documents;
  }
}

}  // namespace
}  // namespace tessel::parallel
