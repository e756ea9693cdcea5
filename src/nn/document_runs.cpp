#include "nn/document_runs.h"

#include <ATen/ATen.h>

#include <unordered_set>

#include "core/error.h"
#include "nn/format.h"
#include "nn/window_bands.h"

namespace tessel::nn {

std::optional<DocumentRuns> document_runs(const at::Tensor& document_ids) {
  TESSEL_CHECK(document_ids.dim() == 2 && document_ids.device().is_cpu() &&
                   !at::isFloatingType(document_ids.scalar_type()),
               "document_runs takes [B, T] integer document ids on the host, got {} {} on {}",
               c10::toString(document_ids.scalar_type()), shape_string(document_ids.sizes()),
               document_ids.device().str());
  const at::Tensor ids = document_ids.to(at::kLong).contiguous();
  const int64_t B = ids.size(0), T = ids.size(1);
  const int64_t* p = ids.data_ptr<int64_t>();
  DocumentRuns runs(static_cast<size_t>(B));
  std::unordered_set<int64_t> ended;  // ids whose run in this row is over
  for (int64_t b = 0; b < B; ++b) {
    ended.clear();
    const int64_t* row = p + b * T;
    int64_t start = 0;
    for (int64_t t = 1; t <= T; ++t) {
      if (t < T && row[t] == row[start]) continue;
      if (!ended.insert(row[start]).second) return std::nullopt;
      runs[static_cast<size_t>(b)].push_back(t - start);
      start = t;
    }
  }
  return runs;
}

namespace {

// Scores per head one attention call computes over `n` positions. The CPU's
// tiled kernel skips what no query sees: the pairs within the causal window.
// On a device the library's causal kernel does the causal triangle, its
// masked kernel (documents, or a window) the whole square, or with a window
// long rows go in bands (nn/window_bands.h: the first band w x w, each
// other query 2w - 1 keys).
double call_scores(int64_t n, std::optional<int64_t> window, bool masked, bool on_device) {
  const double N = static_cast<double>(n);
  auto causal_square = [](double m) { return 0.5 * m * (m + 1); };
  if (!on_device) {
    if (!window || *window >= n) return causal_square(N);
    const double w = static_cast<double>(*window);
    return causal_square(w) + (N - w) * w;
  }
  if (window && window_bands_pay(n, *window)) {
    const double w = static_cast<double>(*window);
    return w * w + (N - w) * (2 * w - 1);
  }
  return (masked || window) ? N * N : causal_square(N);
}

}  // namespace

bool per_document_pays(const DocumentRuns& runs, int64_t row_length, bool on_device,
                       std::optional<int64_t> window) {
  const double call = on_device ? 131072.0 : 1024.0;  // scores per head a kernel call costs (see the header)
  double per_document = 0.0;
  for (const auto& row : runs) {
    for (int64_t length : row) per_document += call_scores(length, window, /*masked=*/false, on_device) + call;
  }
  const double masked_row = call_scores(row_length, window, /*masked=*/true, on_device);
  return per_document < static_cast<double>(runs.size()) * (masked_row + call);
}

at::Tensor attend_per_document(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const DocumentRuns& runs, const CausalAttentionCore& core) {
  TESSEL_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && k.size(0) == q.size(0) && k.size(2) == q.size(2) &&
                   v.sizes() == k.sizes(),
               "attend_per_document: needs q [B, Hq, T, D], k and v [B, Hkv, T, D], got {}, {}, {}",
               shape_string(q.sizes()), shape_string(k.sizes()), shape_string(v.sizes()));
  const int64_t B = q.size(0), T = q.size(2);
  TESSEL_CHECK(static_cast<int64_t>(runs.size()) == B, "attend_per_document: runs of {} rows for {} rows",
               runs.size(), B);
  bool whole_rows = true;
  for (int64_t b = 0; b < B; ++b) {
    const auto& row = runs[static_cast<size_t>(b)];
    int64_t covered = 0;
    for (int64_t n : row) {
      TESSEL_CHECK(n > 0, "attend_per_document: row {} has a run of {} positions", b, n);
      covered += n;
    }
    TESSEL_CHECK(covered == T, "attend_per_document: row {}'s runs cover {} of its {} positions", b, covered, T);
    whole_rows = whole_rows && row.size() == 1;
  }
  if (whole_rows) return core(q, k, v);

  const std::vector<at::Tensor> q_rows = q.unbind(0), k_rows = k.unbind(0), v_rows = v.unbind(0);
  std::vector<at::Tensor> out_rows;
  out_rows.reserve(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const size_t i = static_cast<size_t>(b);
    const auto& row = runs[i];
    if (row.size() == 1) {
      out_rows.push_back(core(q_rows[i].unsqueeze(0), k_rows[i].unsqueeze(0), v_rows[i].unsqueeze(0)));
      continue;
    }
    // [H, T, D] rows split along T: split's backward concatenates the pieces'
    // gradients (narrow's would add a whole-row zero tensor per piece).
    const std::vector<at::Tensor> qs = q_rows[i].split_with_sizes(row, 1), ks = k_rows[i].split_with_sizes(row, 1),
                                  vs = v_rows[i].split_with_sizes(row, 1);
    std::vector<at::Tensor> pieces;
    pieces.reserve(row.size());
    for (size_t j = 0; j < row.size(); ++j) {
      pieces.push_back(core(qs[j].unsqueeze(0), ks[j].unsqueeze(0), vs[j].unsqueeze(0)));
    }
    out_rows.push_back(at::cat(pieces, 2));
  }
  return at::cat(out_rows, 0);
}

}  // namespace tessel::nn
