#include "nn/varlen_attention.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/host_to_device.h"
#include "nn/format.h"

namespace tessel::nn {

VarlenSequences varlen_sequences(const DocumentRuns& runs) {
  std::vector<int32_t> ends{0};
  VarlenSequences out;
  int64_t end = 0;
  for (const auto& row : runs) {
    for (const int64_t length : row) {
      TESSEL_CHECK(length > 0, "varlen attention: a run of {} tokens", length);
      end += length;
      // The kernel's bounds are int32.
      TESSEL_CHECK(end <= std::numeric_limits<int32_t>::max(), "varlen attention: {} tokens exceed int32", end);
      ends.push_back(static_cast<int32_t>(end));
      out.longest = std::max(out.longest, length);
    }
  }
  out.cumulative_lengths = at::tensor(ends, at::kInt);
  return out;
}

DocumentRuns whole_rows(int64_t rows, int64_t length) {
  return DocumentRuns(static_cast<size_t>(rows), std::vector<int64_t>{length});
}

at::Tensor attend_varlen(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const DocumentRuns& runs,
                         std::optional<int64_t> window, const VarlenAttentionCore& core) {
  TESSEL_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && k.sizes() == v.sizes() && q.size(0) == k.size(0) &&
                   q.size(2) == k.size(2) && q.size(3) == k.size(3) && k.size(1) > 0 && q.size(1) % k.size(1) == 0,
               "varlen attention: q {} with k {} and v {}", shape_string(q.sizes()), shape_string(k.sizes()),
               shape_string(v.sizes()));
  const int64_t B = q.size(0), T = q.size(2), D = q.size(3);
  TESSEL_CHECK(static_cast<int64_t>(runs.size()) == B, "varlen attention: runs of {} rows for {} rows",
               runs.size(), B);
  for (const auto& row : runs) {
    int64_t length = 0;
    for (const int64_t n : row) length += n;
    TESSEL_CHECK(length == T, "varlen attention: a row's runs cover {} of its {} positions", length, T);
  }
  TESSEL_CHECK(!window || *window > 0, "varlen attention: a window of {}", window.value_or(0));
  const VarlenSequences sequences = varlen_sequences(runs);
  // [B, H, T, D] -> [B, T, H, D] -> [B * T, H, D]: the rows end to end.
  const auto tokens_first = [&](const at::Tensor& x) { return x.transpose(1, 2).reshape({B * T, x.size(1), D}); };
  const at::Tensor out = core(tokens_first(q), tokens_first(k), tokens_first(v),
                              to_device_without_waiting(sequences.cumulative_lengths, q.device()), sequences.longest,
                              window);
  TESSEL_CHECK(out.dim() == 3 && out.size(0) == B * T && out.size(1) == q.size(1) && out.size(2) == D,
               "varlen attention: the kernel returned {} for {} tokens of {} heads", shape_string(out.sizes()), B * T,
               q.size(1));
  return out.view({B, T, q.size(1), D}).transpose(1, 2);
}

}  // namespace tessel::nn
