// Vocab-parallel cross-entropy over real MPI ranks against the plain loss on
// the full logits computed locally on every rank.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "dist/communicator.h"
#include "loss/vocab_parallel_cross_entropy.h"

namespace tessel::loss {
namespace {

struct Case {
  int64_t tokens;
  int64_t vocab;
};

// torch.chunk split of the vocabulary: ceil-sized, trailing ranks short or empty.
std::pair<int64_t, int64_t> chunk(int64_t n, int rank, int world) {
  const int64_t size = (n + world - 1) / world;
  const int64_t begin = std::min<int64_t>(n, size * rank);
  return {begin, std::min<int64_t>(n, begin + size) - begin};
}

TEST(VocabParallelCrossEntropy, MatchesFullLossAndGradient) {
  auto tp = dist::world();
  const int w = tp->size(), r = tp->rank();
  for (Case c : {Case{6, 4 * w + 1}, Case{5, 7}, Case{3, 2}, Case{8, 33}}) {
    SCOPED_TRACE(::testing::Message() << "tokens " << c.tokens << " vocab " << c.vocab);
    at::manual_seed(42 + c.vocab);
    at::Tensor full = at::randn({c.tokens, c.vocab}) * 3;
    at::Tensor labels = at::randint(0, c.vocab, {c.tokens}, at::kLong);
    labels[1] = kIgnoreIndex;
    at::Tensor ref_logits = full.clone().requires_grad_(true);
    LossSum ref = cross_entropy_sum(ref_logits, labels);
    ref.sum.backward();

    auto [begin, len] = chunk(c.vocab, r, w);
    at::Tensor local = full.slice(1, begin, begin + len).clone().requires_grad_(true);
    LossSum got = vocab_parallel_cross_entropy_sum(local, labels, begin, c.vocab, tp);
    EXPECT_EQ(got.num_valid.item<int64_t>(), ref.num_valid.item<int64_t>());
    EXPECT_NEAR(got.sum.item<double>(), ref.sum.item<double>(), 1e-5 * std::abs(ref.sum.item<double>()));
    got.sum.backward();
    EXPECT_TRUE(at::allclose(local.grad(), ref_logits.grad().slice(1, begin, begin + len), 1e-5, 1e-6));
  }
}

}  // namespace
}  // namespace tessel::loss
