// nn/varlen_attention.h: packed rows laid end to end for a variable-length
// kernel. With a reference kernel written here (a plain float64 softmax per
// sequence), attend_varlen must equal causal_attention with the same
// document ids and window over whole rows, forward and backward. A device's
// library kernel is checked the same way on a GPU (tests/gpu/attention_test).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <optional>
#include <vector>

#include "core/error.h"
#include "nn/attention.h"
#include "nn/document_runs.h"
#include "nn/varlen_attention.h"

namespace tessel::nn {
namespace {

constexpr double kScale = 0.3;

// The variable-length kernel's contract, computed sequence by sequence:
// query i of a sequence sees its keys j <= i with i - j < window.
at::Tensor reference_core(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& cumulative_lengths, int64_t longest, std::optional<int64_t> window) {
  const at::Tensor bounds = cumulative_lengths.to(at::kLong);
  const int64_t group = q.size(1) / k.size(1);
  std::vector<at::Tensor> outs;
  int64_t seen_longest = 0;
  for (int64_t s = 0; s + 1 < bounds.size(0); ++s) {
    const int64_t begin = bounds[s].item<int64_t>(), n = bounds[s + 1].item<int64_t>() - begin;
    seen_longest = std::max(seen_longest, n);
    const at::Tensor qs = q.narrow(0, begin, n).transpose(0, 1);                                   // [Hq, n, D]
    const at::Tensor ks = k.narrow(0, begin, n).transpose(0, 1).repeat_interleave(group, 0);      // [Hq, n, D]
    const at::Tensor vs = v.narrow(0, begin, n).transpose(0, 1).repeat_interleave(group, 0);
    const at::Tensor i = at::arange(n, at::kLong).unsqueeze(1), j = at::arange(n, at::kLong).unsqueeze(0);
    at::Tensor visible = j.le(i);
    if (window) visible = visible.logical_and((i - j).lt(*window));
    const at::Tensor scores = at::matmul(qs, ks.transpose(1, 2)).mul(kScale).masked_fill(visible.logical_not(), -INFINITY);
    outs.push_back(at::matmul(at::softmax(scores, -1), vs).transpose(0, 1));  // [n, Hq, D]
  }
  EXPECT_EQ(longest, seen_longest) << "the longest sequence passed to the kernel";
  return at::cat(outs, 0);
}

struct Case {
  const char* name;
  std::vector<std::vector<int64_t>> runs;  // per row; empty: no documents (whole rows)
  std::optional<int64_t> window;
};

void check(const Case& c, int64_t T) {
  SCOPED_TRACE(c.name);
  const int64_t B = 2, Hq = 6, Hkv = 2, D = 8;
  at::manual_seed(3);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor q0 = at::randn({B, Hq, T, D}, f64), k0 = at::randn({B, Hkv, T, D}, f64);
  const at::Tensor v0 = at::randn({B, Hkv, T, D}, f64), dout = at::randn({B, Hq, T, D}, f64);
  at::Tensor ids;
  DocumentRuns runs = whole_rows(B, T);
  if (!c.runs.empty()) {
    ids = at::empty({B, T}, at::kLong);
    for (int64_t b = 0; b < B; ++b) {
      int64_t t = 0, id = 0;
      for (const int64_t n : c.runs[static_cast<size_t>(b)]) {
        ids[b].narrow(0, t, n).fill_(id++);
        t += n;
      }
    }
    runs = *document_runs(ids);
  }
  at::Tensor q = q0.clone().requires_grad_(), k = k0.clone().requires_grad_(), v = v0.clone().requires_grad_();
  const at::Tensor want = causal_attention(q, k, v, kScale, c.window, std::nullopt, ids);
  want.backward(dout);
  at::Tensor vq = q0.clone().requires_grad_(), vk = k0.clone().requires_grad_(), vv = v0.clone().requires_grad_();
  const at::Tensor got = attend_varlen(vq, vk, vv, runs, c.window, reference_core);
  got.backward(dout);
  EXPECT_TRUE(at::allclose(got, want, 1e-10, 1e-10)) << (got - want).abs().max().item<double>();
  EXPECT_TRUE(at::allclose(vq.grad(), q.grad(), 1e-10, 1e-10)) << "dq";
  EXPECT_TRUE(at::allclose(vk.grad(), k.grad(), 1e-10, 1e-10)) << "dk";
  EXPECT_TRUE(at::allclose(vv.grad(), v.grad(), 1e-10, 1e-10)) << "dv";
}

TEST(VarlenAttention, SequencesAreTheRunsEndToEnd) {
  const VarlenSequences s = varlen_sequences({{3, 5}, {8}, {1, 1, 6}});
  EXPECT_TRUE(at::equal(s.cumulative_lengths, at::tensor(std::vector<int32_t>{0, 3, 8, 16, 17, 18, 24}, at::kInt)));
  EXPECT_EQ(s.cumulative_lengths.scalar_type(), at::kInt);
  EXPECT_EQ(s.longest, 8);
  EXPECT_EQ(whole_rows(2, 7), (DocumentRuns{{7}, {7}}));
}

TEST(VarlenAttention, EqualsWholeRowAttentionWithDocumentsAndWindows) {
  const int64_t T = 23;
  for (const Case& c : {Case{"whole rows", {}, std::nullopt}, Case{"window 5", {}, 5},
                        Case{"window longer than the row", {}, 40}, Case{"window 1", {}, 1},
                        Case{"documents", {{7, 9, 7}, {1, 22}}, std::nullopt},
                        Case{"documents and window 4", {{7, 9, 7}, {12, 11}}, 4},
                        Case{"one-token documents", {{1, 1, 1, 20}, {23}}, 3}}) {
    check(c, T);
  }
}

TEST(VarlenAttention, RunsThatDoNotCoverTheRowsAreRefused) {
  const at::Tensor q = at::zeros({2, 2, 6, 8}), k = at::zeros({2, 1, 6, 8});
  EXPECT_THROW(attend_varlen(q, k, k, {{6}}, std::nullopt, reference_core), Error);          // one row's runs
  EXPECT_THROW(attend_varlen(q, k, k, {{6}, {2, 3}}, std::nullopt, reference_core), Error);  // 5 of 6
  EXPECT_THROW(attend_varlen(q, k, k, {{6}, {6}}, 0, reference_core), Error);                // window 0
  EXPECT_THROW(attend_varlen(q, at::zeros({2, 4, 6, 8}), at::zeros({2, 4, 6, 8}), {{6}, {6}}, std::nullopt,
                             reference_core),
               Error);  // more K/V heads than query heads
}

}  // namespace
}  // namespace tessel::nn
