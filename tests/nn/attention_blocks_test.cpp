// Attention computed block by block (nn/attention_blocks.h) against
// causal_attention over the whole row, forward and backward (autograd of the
// whole-row attention), in float64: the query and key blocks are cut at
// several sizes, so blocks are fully visible, partly masked and skipped.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/attention_blocks.h"

namespace tessel::nn {
namespace {

struct BlockCase {
  std::string name;
  int64_t block = 3;
  std::optional<int64_t> window = std::nullopt;
  std::optional<double> softcap = std::nullopt;
  bool documents = false;
  // The default takes both kv heads in one batched run; 1 byte, one at a time.
  int64_t score_bytes_budget = kDefaultScoreBytesBudget;
};

struct Row {
  at::Tensor q, k, v, dout, documents;
};

constexpr int64_t B = 2, Hq = 4, Hkv = 2, T = 12, D = 5;
constexpr double kScale = 0.37;

Row random_row(uint64_t seed, bool documents) {
  at::Generator g = at::detail::createCPUGenerator(seed);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  Row r{at::randn({B, Hq, T, D}, g, f64), at::randn({B, Hkv, T, D}, g, f64), at::randn({B, Hkv, T, D}, g, f64),
        at::randn({B, Hq, T, D}, g, f64), {}};
  // Row 0: documents of 5, 4 and 3 tokens; row 1: 7 tokens then 5 of padding (-1).
  if (documents) r.documents = at::tensor({0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, -1, -1, -1, -1, -1}, at::kLong).view({B, T});
  return r;
}

AttentionBlockMask mask_of(const BlockCase& c, const Row& r, int64_t q0, int64_t k0, int64_t len) {
  AttentionBlockMask m;
  m.query_start = q0;
  m.key_start = k0;
  m.sliding_window = c.window;
  if (c.documents) {
    m.query_documents = r.documents.narrow(1, q0, len);
    m.key_documents = r.documents.narrow(1, k0, len);
  }
  return m;
}

class AttentionBlocks : public ::testing::TestWithParam<BlockCase> {};

TEST_P(AttentionBlocks, MatchWholeRowForwardAndBackward) {
  const BlockCase c = GetParam();
  const Row r = random_row(42, c.documents);
  // The whole-row reference and its gradients.
  at::Tensor q = r.q.clone().requires_grad_(), k = r.k.clone().requires_grad_(), v = r.v.clone().requires_grad_();
  const at::Tensor ref = causal_attention(q, k, v, kScale, c.window, c.softcap, r.documents);
  (ref * r.dout).sum().backward();

  const AttentionScoring scoring{kScale, c.softcap};
  const int64_t n = T / c.block;
  at::Tensor out = at::zeros({B, Hq, T, D}, at::kDouble);
  at::Tensor lse = at::full({B, Hq, T}, -std::numeric_limits<double>::infinity(), at::kDouble);
  int skipped = 0;
  for (int64_t qb = 0; qb < n; ++qb) {
    for (int64_t kb = 0; kb < n; ++kb) {
      const auto m = mask_of(c, r, qb * c.block, kb * c.block, c.block);
      if (block_visibility(m, c.block, c.block) == BlockVisibility::None) {
        ++skipped;
        continue;
      }
      const auto res = attention_block_forward(r.q.narrow(2, qb * c.block, c.block), r.k.narrow(2, kb * c.block, c.block),
                                               r.v.narrow(2, kb * c.block, c.block), m, scoring,
                                               c.score_bytes_budget);
      merge_attention_block(out.narrow(2, qb * c.block, c.block), lse.narrow(2, qb * c.block, c.block), res);
    }
  }
  EXPECT_GE(skipped, static_cast<int>(n * (n - 1) / 2)) << "every block above the diagonal is skipped";
  EXPECT_TRUE(at::allclose(out, ref.detach(), 1e-12, 1e-12)) << "max diff " << (out - ref).abs().max().item<double>();

  const at::Tensor delta = (r.dout * out).sum(-1);
  at::Tensor dq = at::zeros_like(r.q), dk = at::zeros_like(r.k), dv = at::zeros_like(r.v);
  for (int64_t qb = 0; qb < n; ++qb) {
    for (int64_t kb = 0; kb < n; ++kb) {
      const auto m = mask_of(c, r, qb * c.block, kb * c.block, c.block);
      if (block_visibility(m, c.block, c.block) == BlockVisibility::None) continue;
      const auto rows = [&](const at::Tensor& t) { return t.narrow(2, qb * c.block, c.block); };
      const auto keys = [&](const at::Tensor& t) { return t.narrow(2, kb * c.block, c.block); };
      const auto g = attention_block_backward(rows(r.q), keys(r.k), keys(r.v), rows(r.dout), rows(lse), rows(delta), m,
                                              scoring, c.score_bytes_budget);
      rows(dq).add_(g.dq);
      keys(dk).add_(g.dk);
      keys(dv).add_(g.dv);
    }
  }
  EXPECT_TRUE(at::allclose(dq, q.grad(), 1e-11, 1e-12)) << "dq max diff " << (dq - q.grad()).abs().max().item<double>();
  EXPECT_TRUE(at::allclose(dk, k.grad(), 1e-11, 1e-12)) << "dk max diff " << (dk - k.grad()).abs().max().item<double>();
  EXPECT_TRUE(at::allclose(dv, v.grad(), 1e-11, 1e-12)) << "dv max diff " << (dv - v.grad()).abs().max().item<double>();
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionBlocks,
                         ::testing::Values(BlockCase{"causal_blocks_of_3"}, BlockCase{"causal_blocks_of_4", 4},
                                           BlockCase{"one_block", 12}, BlockCase{"window_5", 3, 5},
                                           BlockCase{"window_2_blocks_of_4", 4, 2},
                                           BlockCase{"softcap", 3, std::nullopt, 2.0},
                                           BlockCase{"documents", 3, std::nullopt, std::nullopt, true},
                                           BlockCase{"everything", 2, 4, 1.5, true},
                                           BlockCase{"one_kv_head_per_run", 3, std::nullopt, std::nullopt, false, 1},
                                           BlockCase{"everything_one_kv_head_per_run", 2, 4, 1.5, true, 1}),
                         [](const auto& info) { return info.param.name; });

// One block holding the whole row: its lse is the final one, so backward may
// take the forward's kept probabilities instead of recomputing them, and must
// give the whole-row attention's gradients either way.
TEST(AttentionBlocksKeptProbabilities, BackwardTakesThemAndMatchesTheWholeRow) {
  const Row r = random_row(11, /*documents=*/true);
  at::Tensor q = r.q.clone().requires_grad_(), k = r.k.clone().requires_grad_(), v = r.v.clone().requires_grad_();
  const at::Tensor ref = causal_attention(q, k, v, kScale, 9, std::nullopt, r.documents);
  (ref * r.dout).sum().backward();

  const BlockCase c{"whole_row", T, 9, std::nullopt, true};
  const auto m = mask_of(c, r, 0, 0, T);
  const AttentionScoring scoring{kScale, std::nullopt};
  const auto res = attention_block_forward(r.q, r.k, r.v, m, scoring, kDefaultScoreBytesBudget, /*keep=*/true);
  ASSERT_TRUE(res.probabilities.defined());
  ASSERT_EQ(res.probabilities.sizes(), at::IntArrayRef({B * Hkv, (Hq / Hkv) * T, T}));
  // Row 1's padding (-1) is a document of its own; every query sees itself, so
  // every row of probabilities sums to one.
  EXPECT_TRUE(at::allclose(res.probabilities.sum(-1), at::ones({B * Hkv, (Hq / Hkv) * T}, at::kDouble), 1e-12, 1e-12));
  EXPECT_TRUE(at::allclose(res.out, ref.detach(), 1e-12, 1e-12));

  const at::Tensor delta = (r.dout * res.out).sum(-1);
  const auto kept = attention_block_backward(r.q, r.k, r.v, r.dout, res.lse, delta, m, scoring,
                                             kDefaultScoreBytesBudget, res.probabilities);
  const auto recomputed = attention_block_backward(r.q, r.k, r.v, r.dout, res.lse, delta, m, scoring);
  for (const auto* g : {&kept, &recomputed}) {
    EXPECT_TRUE(at::allclose(g->dq, q.grad(), 1e-11, 1e-12)) << (g->dq - q.grad()).abs().max().item<double>();
    EXPECT_TRUE(at::allclose(g->dk, k.grad(), 1e-11, 1e-12)) << (g->dk - k.grad()).abs().max().item<double>();
    EXPECT_TRUE(at::allclose(g->dv, v.grad(), 1e-11, 1e-12)) << (g->dv - v.grad()).abs().max().item<double>();
  }
  // Wrongly shaped probabilities are refused, not read.
  EXPECT_ANY_THROW(attention_block_backward(r.q, r.k, r.v, r.dout, res.lse, delta, m, scoring,
                                            kDefaultScoreBytesBudget, res.probabilities.narrow(2, 0, T - 1)));
}

TEST(AttentionBlocksKeptProbabilities, NotKeptWithSoftcapOrHeadsInSeveralRuns) {
  const Row r = random_row(5, false);
  const BlockCase c{"whole_row", T};
  const auto m = mask_of(c, r, 0, 0, T);
  EXPECT_FALSE(attention_block_forward(r.q, r.k, r.v, m, {kScale, 2.0}, kDefaultScoreBytesBudget, true)
                   .probabilities.defined())
      << "softcap's backward needs the raw scores";
  EXPECT_FALSE(attention_block_forward(r.q, r.k, r.v, m, {kScale, std::nullopt}, 1, true).probabilities.defined())
      << "one kv head per run";
  EXPECT_FALSE(attention_block_forward(r.q, r.k, r.v, m, {kScale, std::nullopt}).probabilities.defined())
      << "not asked for";
}

TEST(AttentionBlockVisibility, FromIndexRanges) {
  AttentionBlockMask m;
  m.query_start = 8;
  m.key_start = 4;
  EXPECT_EQ(block_visibility(m, 4, 4), BlockVisibility::Full);     // keys 4..7 before queries 8..11
  m.key_start = 8;
  EXPECT_EQ(block_visibility(m, 4, 4), BlockVisibility::Partial);  // the diagonal
  m.key_start = 12;
  EXPECT_EQ(block_visibility(m, 4, 4), BlockVisibility::None);     // all keys after all queries
  m.key_start = 0;
  m.sliding_window = 5;                                            // query 8 sees keys 4..8 only
  EXPECT_EQ(block_visibility(m, 4, 4), BlockVisibility::None);
  m.sliding_window = 9;                                            // query 8 sees 0..8, query 11 sees 3..11
  EXPECT_EQ(block_visibility(m, 4, 4), BlockVisibility::Partial);
  m.sliding_window = 12;
  EXPECT_EQ(block_visibility(m, 4, 4), BlockVisibility::Full);
  m.query_documents = at::zeros({1, 4}, at::kLong);
  m.key_documents = at::zeros({1, 4}, at::kLong);
  EXPECT_EQ(block_visibility(m, 4, 4), BlockVisibility::Partial);  // documents need the mask
}

}  // namespace
}  // namespace tessel::nn
