// Ring attention over real ranks against causal_attention over the whole
// row: every rank builds the same random row, attends with its load-balanced
// chunks through the ring, and must get exactly its chunks of the whole-row
// output and of the gradients of q, k and v. Cases: GQA, a sliding window
// shorter than a chunk and one spanning chunks, softcapping, packed
// documents, float32 and bfloat16 inputs; on the world and on sub-groups.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "dist/communicator.h"
#include "nn/attention.h"
#include "parallel/load_balanced_chunks.h"
#include "parallel/ring_attention.h"

namespace tessel::parallel {
namespace {

struct RingCase {
  std::string name;
  at::ScalarType dtype = at::kDouble;
  std::optional<int64_t> window = std::nullopt;
  std::optional<double> softcap = std::nullopt;
  bool documents = false;
  double tolerance = 1e-11;
};

// One row of 2·cp·chunk tokens, identical on every rank (same seed).
struct Row {
  at::Tensor q, k, v, dout, documents;
};
Row random_row(int cp, int64_t chunk, const RingCase& c) {
  at::Generator g = at::detail::createCPUGenerator(1234);
  const int64_t B = 2, Hq = 6, Hkv = 2, D = 8, T = 2 * cp * chunk;
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  Row r{at::randn({B, Hq, T, D}, g, f64), at::randn({B, Hkv, T, D}, g, f64), at::randn({B, Hkv, T, D}, g, f64),
        at::randn({B, Hq, T, D}, g, f64), {}};
  r.q = r.q.to(c.dtype), r.k = r.k.to(c.dtype), r.v = r.v.to(c.dtype), r.dout = r.dout.to(c.dtype);
  if (c.documents) {
    // Documents of random lengths 1..T/2 (crossing chunk edges), the last
    // few tokens of row 1 padding.
    r.documents = at::empty({B, T}, at::kLong);
    for (int64_t b = 0; b < B; ++b) {
      int64_t t = 0, doc = 0;
      while (t < T) {
        const int64_t len = 1 + at::randint(T / 2, {1}, g, at::kLong).item<int64_t>();
        r.documents[b].narrow(0, t, std::min(len, T - t)).fill_(doc++);
        t += len;
      }
    }
    r.documents[1].narrow(0, T - 3, 3).fill_(-1);
  }
  return r;
}

void check_against_whole_row(const dist::CommunicatorPtr& cp, int64_t chunk, const RingCase& c) {
  const Row r = random_row(cp->size(), chunk, c);
  const double scale = 0.3;
  at::Tensor q = r.q.clone().requires_grad_(), k = r.k.clone().requires_grad_(), v = r.v.clone().requires_grad_();
  const at::Tensor ref = nn::causal_attention(q, k, v, scale, c.window, c.softcap, r.documents);
  (ref.to(at::kDouble) * r.dout.to(at::kDouble)).sum().backward();

  const int n = cp->size(), me = cp->rank();
  auto mine = [&](const at::Tensor& t) { return take_load_balanced_chunks(t, 2, n, me); };
  at::Tensor lq = mine(r.q).requires_grad_(), lk = mine(r.k).requires_grad_(), lv = mine(r.v).requires_grad_();
  const at::Tensor docs = c.documents ? take_load_balanced_chunks(r.documents, 1, n, me) : at::Tensor();
  auto stats = std::make_shared<RingAttentionStats>();
  const at::Tensor out = ring_attention(lq, lk, lv, docs, cp, RingAttentionOptions{scale, c.window, c.softcap, stats});
  (out.to(at::kDouble) * mine(r.dout).to(at::kDouble)).sum().backward();

  const std::string what = c.name + " on " + cp->name();
  auto expect_close = [&](const at::Tensor& got, const at::Tensor& want, const char* name) {
    const double diff = (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
    const double size = want.to(at::kDouble).abs().max().item<double>();
    EXPECT_LE(diff, c.tolerance * std::max(1.0, size)) << what << ": " << name << " max diff " << diff;
  };
  expect_close(out, mine(ref.detach()), "output");
  expect_close(lq.grad(), mine(q.grad()), "dq");
  expect_close(lk.grad(), mine(k.grad()), "dk");
  expect_close(lv.grad(), mine(v.grad()), "dv");
  // Forward passes K/V n-1 times; backward passes K/V n-1 times and the
  // block gradients n times (the last hands them back to their owners).
  EXPECT_EQ(stats->shifts, n == 1 ? 0 : 3 * n - 2) << what;
}

const RingCase kCases[] = {
    {"causal_gqa"},
    {"window_inside_a_chunk", at::kDouble, 3},
    {"window_across_chunks", at::kDouble, 13},
    {"softcap", at::kDouble, std::nullopt, 2.0},
    {"documents", at::kDouble, std::nullopt, std::nullopt, true},
    {"window_softcap_documents", at::kDouble, 7, 1.5, true},
    {"float32", at::kFloat, 9, std::nullopt, false, 2e-5},
    {"bfloat16", at::kBFloat16, std::nullopt, std::nullopt, false, 3e-2},
};

TEST(RingAttentionMpi, WholeWorldMatchesWholeRow) {
  for (const RingCase& c : kCases) check_against_whole_row(dist::world(), 5, c);
}

TEST(RingAttentionMpi, SubGroupsRunTheirOwnRings) {
  const auto& world = dist::world();
  if (world->size() < 4) GTEST_SKIP() << "needs 4 ranks for two rings of 2";
  // Ranks {0,2} and {1,3}: the ring of each group only, next to the other.
  const dist::CommunicatorPtr cp = world->split(world->rank() % 2, world->rank(), "cp");
  for (const RingCase& c : kCases) check_against_whole_row(cp, 4, c);
}

}  // namespace
}  // namespace tessel::parallel
