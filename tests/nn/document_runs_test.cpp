// Packed rows attended one document at a time (nn/document_runs.h): the runs
// read from host ids, written out by hand; attend_per_document over the
// tiled kernel (and the library's, where the build has it) against
// causal_attention with the same ids as a mask, forward and backward, in
// float64, with a window, a softcap and grouped K/V heads; and the Attention
// module on packed rows against each document run as a row of its own.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/error.h"
#include "nn/attention.h"
#include "nn/document_runs.h"
#include "nn/library_attention.h"
#include "nn/tiled_attention.h"
#include "support/tensor_close.h"

namespace tessel::nn {
namespace {

at::Tensor packed_ids(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<at::Tensor> out;
  for (const auto& r : rows) out.push_back(at::tensor(r, at::kLong));
  return at::stack(out);
}

TEST(DocumentRuns, EachRowsRunsInOrder) {
  const auto runs = document_runs(packed_ids({{0, 0, 0, 1, 1, -1, -1}, {0, 0, 0, 0, 0, 0, 0}, {4, 5, 6, 6, 6, 6, 9}}));
  ASSERT_TRUE(runs.has_value());
  EXPECT_EQ(*runs, (DocumentRuns{{3, 2, 2}, {7}, {1, 1, 4, 1}}));
  EXPECT_EQ(*document_runs(packed_ids({{3, 3}, {-1, -1}})), (DocumentRuns{{2}, {2}}));
  // int32 ids read alike.
  EXPECT_EQ(*document_runs(packed_ids({{0, 1, 1}}).to(at::kInt)), (DocumentRuns{{1, 2}}));
}

TEST(DocumentRuns, AnIdThatComesBackIsNotARun) {
  // Document 0 again after document 1: its positions see each other across
  // the gap, which no run says.
  EXPECT_FALSE(document_runs(packed_ids({{0, 0, 1, 1}, {0, 1, 1, 0}})).has_value());
  // The same id in two rows is two documents: runs are per row.
  EXPECT_TRUE(document_runs(packed_ids({{0, 0, 1, 1}, {1, 1, 0, 0}})).has_value());
  EXPECT_THROW(document_runs(at::zeros({2, 3}, at::kDouble)), Error);
  EXPECT_THROW(document_runs(at::zeros({6}, at::kLong)), Error);
}

// Runs of `length` tokens filling `rows` rows of `row_length`.
DocumentRuns even_runs(int64_t rows, int64_t row_length, int64_t length) {
  DocumentRuns runs(static_cast<size_t>(rows));
  for (auto& row : runs) {
    for (int64_t t = 0; t < row_length; t += length) row.push_back(std::min(length, row_length - t));
  }
  return runs;
}

// The CPU's figures behind the rule (bench_attention_kernels --documents,
// 2026-12-07): per document won at 1024 tokens in 16 to 64 documents a row
// and at 128 tokens in 2; lost at 256 tokens in 64 and 128 in 32.
TEST(DocumentRuns, PerDocumentPaysForDocumentsLongerThanACallsCost) {
  EXPECT_TRUE(per_document_pays(even_runs(2, 1024, 64), 1024, false));
  EXPECT_TRUE(per_document_pays(even_runs(2, 1024, 16), 1024, false));
  EXPECT_TRUE(per_document_pays(even_runs(2, 128, 64), 128, false));
  EXPECT_FALSE(per_document_pays(even_runs(2, 256, 4), 256, false));
  EXPECT_FALSE(per_document_pays(even_runs(2, 128, 4), 128, false));
  // Whole rows cost the same either way: not taken.
  EXPECT_FALSE(per_document_pays(even_runs(2, 512, 512), 512, false));
  // A device's call costs far more scores, and its masked pass is whole
  // squares: rows of 4096 in 512- and 64-token documents pay there, 16-token
  // ones not, nor rows of 1024 in 64-token documents.
  EXPECT_TRUE(per_document_pays(even_runs(2, 4096, 512), 4096, true));
  EXPECT_TRUE(per_document_pays(even_runs(2, 4096, 64), 4096, true));
  EXPECT_FALSE(per_document_pays(even_runs(2, 4096, 16), 4096, true));
  EXPECT_FALSE(per_document_pays(even_runs(2, 1024, 64), 1024, true));
}

// With a sliding window the row's own pass is cheaper: the CPU's tiled kernel
// computes only the pairs within the window, a device takes the row in bands
// (nn/window_bands.h) instead of a whole square.
TEST(DocumentRuns, PerDocumentWeighsTheWindowedRowPass) {
  // Device, rows of 4096 in 64-token documents: against a [T, T] mask they
  // pay (above); against bands of a 512 window not. 512-token documents still do.
  EXPECT_FALSE(per_document_pays(even_runs(2, 4096, 64), 4096, true, 512));
  EXPECT_TRUE(per_document_pays(even_runs(2, 4096, 512), 4096, true, 512));
  // CPU, rows of 1024 in 16-token documents: pay without a window (above),
  // not against a 64-token window's pass.
  EXPECT_FALSE(per_document_pays(even_runs(2, 1024, 16), 1024, false, 64));
  // A window as long as the row changes nothing.
  EXPECT_TRUE(per_document_pays(even_runs(2, 1024, 16), 1024, false, 1024));
}

struct PackedCase {
  std::optional<int64_t> window;
  std::optional<double> softcap;
};

// attend_per_document over `core_of(window, softcap)` against the masked
// reference, forward and backward.
template <typename CoreOf>
void check_per_document_against_mask(CoreOf core_of, bool with_softcap) {
  const int64_t T = 13;
  const at::Tensor ids = packed_ids({{0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2},
                                     {7, 7, 7, 7, 7, 7, 7, 7, -1, -1, -1, -1, -1},
                                     {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3}});
  const auto runs = document_runs(ids);
  ASSERT_TRUE(runs.has_value());
  at::manual_seed(23);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q0 = at::randn({3, 6, T, 5}, f64), k0 = at::randn({3, 2, T, 5}, f64);
  const at::Tensor v0 = at::randn({3, 2, T, 5}, f64), dout = at::randn({3, 6, T, 5}, f64);
  std::vector<PackedCase> cases = {{std::nullopt, std::nullopt}, {3, std::nullopt}};
  if (with_softcap) cases.push_back({2, 0.7});
  for (const PackedCase& c : cases) {
    SCOPED_TRACE(testing::Message() << "window " << c.window.value_or(0) << " softcap " << c.softcap.value_or(0));
    at::Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
    const at::Tensor ref = causal_attention(q, k, v, 0.41, c.window, c.softcap, ids);
    ref.backward(dout);
    at::Tensor pq = q0.clone().requires_grad_(), pk = k0.clone().requires_grad_(), pv = v0.clone().requires_grad_();
    const at::Tensor out = attend_per_document(pq, pk, pv, *runs, core_of(c.window, c.softcap));
    out.backward(dout);
    test_support::expect_allclose(out, ref, 1e-10, "out");
    test_support::expect_allclose(pq.grad(), q.grad(), 1e-10, "dq");
    test_support::expect_allclose(pk.grad(), k.grad(), 1e-10, "dk");
    test_support::expect_allclose(pv.grad(), v.grad(), 1e-10, "dv");
  }
}

TEST(AttendPerDocument, OverTheTiledKernelEqualsTheMask) {
  check_per_document_against_mask(
      [](std::optional<int64_t> window, std::optional<double> softcap) -> CausalAttentionCore {
        return [=](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
          return tiled_causal_attention(q, k, v, 0.41, window, softcap, {}, /*query_tile=*/4);
        };
      },
      /*with_softcap=*/true);
}

TEST(AttendPerDocument, OverTheLibraryKernelEqualsTheMask) {
  if (!library_attention_available()) GTEST_SKIP() << "this build's libtorch has no fused attention";
  check_per_document_against_mask(
      [](std::optional<int64_t> window, std::optional<double>) -> CausalAttentionCore {
        return [=](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
          return library_causal_attention(q, k, v, 0.41, window);
        };
      },
      /*with_softcap=*/false);
}

TEST(AttendPerDocument, RunsThatDoNotTileTheRowsAreRefused) {
  const at::Tensor q = at::zeros({1, 2, 4, 3}), kv = at::zeros({1, 1, 4, 3});
  const CausalAttentionCore core = [](const at::Tensor& q, const at::Tensor&, const at::Tensor&) { return q; };
  EXPECT_THROW(attend_per_document(q, kv, kv, {{2, 1}}, core), Error);     // 3 of 4 positions
  EXPECT_THROW(attend_per_document(q, kv, kv, {{2, 3}}, core), Error);     // 5 of 4
  EXPECT_THROW(attend_per_document(q, kv, kv, {{4, 0}}, core), Error);     // an empty run
  EXPECT_THROW(attend_per_document(q, kv, kv, {{2, 2}, {4}}, core), Error);  // a row too many
  EXPECT_THROW(attend_per_document(q, kv, kv, {{2}}, core), Error);        // one run, half the row
}

// The module on packed rows (host ids: the per-document path) against each
// run as a row by itself with the same rotary angles: a document attends to
// nothing outside itself. Weights' gradients too.
TEST(AttendPerDocument, AttentionOnPackedRowsEqualsEachDocumentAlone) {
  AttentionOptions o;
  o.hidden_size = 16;
  o.num_heads = 4;
  o.num_kv_heads = 2;
  o.head_dim = 4;
  o.sliding_window = 100;  // shorter than row 1's one document, longer than row 0's
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  auto packed = std::make_shared<Attention>(o, f64);
  auto alone = std::make_shared<Attention>(o, f64);
  at::manual_seed(29);
  for (auto& p : packed->named_parameters()) p.value().set_data(at::randn(p.value().sizes(), f64));
  for (auto& p : alone->named_parameters()) p.value().set_data(packed->named_parameters()[p.key()].detach().clone());

  // Row 0: documents of 90 and 50 tokens, then 20 of padding; row 1 one
  // document: long enough runs that Attention takes them one by one.
  const int64_t T = 160;
  const at::Tensor ids = at::stack({at::cat({at::zeros({90}, at::kLong), at::ones({50}, at::kLong),
                                             at::full({20}, -1, at::kLong)}),
                                    at::full({T}, 4, at::kLong)});
  const auto runs = document_runs(ids);
  ASSERT_TRUE(runs.has_value());
  ASSERT_TRUE(per_document_pays(*runs, T, /*on_device=*/false, o.sliding_window));  // as Attention decides
  const at::Tensor x = at::randn({2, T, 16}, f64), cos = at::randn({2, T, 4}, f64), sin = at::randn({2, T, 4}, f64);
  const at::Tensor y = packed->call({x, cos, sin, ids})[0];
  y.pow(2).sum().backward();

  at::Tensor loss = at::zeros({}, f64);
  for (int64_t b = 0; b < 2; ++b) {
    int64_t start = 0;
    for (int64_t length : (*runs)[static_cast<size_t>(b)]) {
      auto piece = [&](const at::Tensor& t) { return t.narrow(0, b, 1).narrow(1, start, length); };
      const at::Tensor y_alone = alone->call({piece(x), piece(cos), piece(sin)})[0];
      test_support::expect_allclose(y_alone, piece(y), 1e-12, "run output");
      loss = loss + y_alone.pow(2).sum();
      start += length;
    }
  }
  loss.backward();
  for (auto& p : packed->named_parameters()) {
    test_support::expect_allclose(p.value().grad(), alone->named_parameters()[p.key()].grad(), 1e-10, p.key());
  }
  // Without the ids the first document's tokens and the second's mix.
  EXPECT_GT((packed->call({x, cos, sin})[0] - y).abs().max().item<double>(), 1e-3);
}

}  // namespace
}  // namespace tessel::nn
