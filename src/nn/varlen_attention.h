// Packed rows and sliding windows in one call of a variable-length kernel.
//
// Why: on a device, rows packed with documents go one document at a time
// (nn/document_runs.h: a kernel call per document per layer, forward and
// backward) or as one masked pass over whole squares, and a sliding window
// goes in bands with copied keys (nn/window_bands.h). The library's flash
// kernel takes a batch of sequences of different lengths laid end to end
// (queries, keys and values [total, H, D], the sequences' bounds as
// cumulative lengths) with a causal window of its own: every document of
// every row, any window, one call, no mask and no copies of the keys beyond
// the one layout change. NeMo RL's sequence packing runs the same kernel
// (flash-attn's varlen functions).
//
// Here the layout: each row's runs (document_runs, or the whole row where
// only a window restricts) become the sequences, in row order; the kernel
// itself is a VarlenAttentionCore, so the CPU tests it with a reference core
// and a device with the library's (nn/library_attention.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>

#include "nn/document_runs.h"

namespace tessel::nn {

// The sequences of `runs` end to end: cumulative lengths [sequences + 1]
// (int32 on the host: 0, then each sequence's end) and the longest one.
struct VarlenSequences {
  at::Tensor cumulative_lengths;
  int64_t longest = 0;
};
VarlenSequences varlen_sequences(const DocumentRuns& runs);

// A variable-length causal kernel: q [total, Hq, D], k and v [total, Hkv, D]
// (Hkv divides Hq), `cumulative_lengths` (int32, on q's device) bounding the
// sequences, the longest's length, and a sliding window (query i sees keys
// i - window < j <= i of its own sequence) -> [total, Hq, D].
using VarlenAttentionCore =
    std::function<at::Tensor(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const at::Tensor& cumulative_lengths, int64_t longest, std::optional<int64_t> window)>;

// q [B, Hq, T, D], k and v [B, Hkv, T, D]: causal attention within each run
// of `runs` (document_runs of the same rows; a row of one run is the whole
// row) and `window`, through one call of `core`. Equal to causal_attention
// with those document ids and window; differentiable in q, k and v.
at::Tensor attend_varlen(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const DocumentRuns& runs,
                         std::optional<int64_t> window, const VarlenAttentionCore& core);

// Each of `rows` rows one run of `length`: the runs of rows without
// documents, for a window alone.
DocumentRuns whole_rows(int64_t rows, int64_t length);

}  // namespace tessel::nn
