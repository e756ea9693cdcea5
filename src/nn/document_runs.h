// Packed rows attended one document at a time.
//
// Why: with document ids [B, T] (packed rows, data/collate.h) a query sees
// only earlier keys of its own document. Computed as one masked attention
// over the whole row, every query is scored against every earlier key of the
// row and the other documents' scores are thrown away: a row of ten
// documents of equal length does ten times the work its documents need, and
// on a device the library's masked kernel also gives up its causal one for
// whole T x T squares plus a [B, T, T] mask per layer (SPEC 10). A document
// is a contiguous run of equal ids along its row (collate numbers documents
// in order and pads with -1 at the end), so attention within documents is
// plain causal attention over each run by itself: the same keys, the same
// mask, no mask at all.
//
// The ids must be on the host (the runs are read from them; reading a
// device's would wait for its queue at every layer): train_step keeps them
// there where nothing else needs them on the device.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace tessel::nn {

// Each row's runs as their lengths, left to right: a run is one document (or
// the padding after the last one); a row's lengths add up to its length.
using DocumentRuns = std::vector<std::vector<int64_t>>;

// The runs of equal ids in host document ids [B, T] (integer); std::nullopt
// when an id comes back in its row after another one (ids that are not runs:
// only a mask says who sees whom there).
std::optional<DocumentRuns> document_runs(const at::Tensor& document_ids);

// Whether attending run by run costs less than one masked pass over the
// rows of `runs`, each `row_length` long, with `window` (a sliding window,
// if any): each run's scores plus a fixed cost per kernel call, against each
// row's masked pass (the CPU's tiled kernel computes the pairs within the
// causal window; on a device the library's causal kernel half a square,
// its masked one whole squares, and a window long rows in bands,
// nn/window_bands.h). Many very short documents
// lose (a call costs more than its few scores), long ones win. The call's
// cost in scores per head: on the CPU measured with bench_attention_kernels
// --documents (2026-12-07, docs/bench/attention.md: ~0.25 ms a call, a
// ~45-token document's square); on a device an estimate, not yet measured
// there: ~50-80 us of host work to issue a call's kernels forward and
// backward, against ~0.3 ns per score over 32 heads of 128 (fwd + bwd at
// ~170 TFLOP/s), ~2^17 scores per head; per document then pays for
// documents longer than ~32 tokens in rows of 4096, ~64 in rows of 2048,
// ~130 in rows of 1024.
bool per_document_pays(const DocumentRuns& runs, int64_t row_length, bool on_device,
                       std::optional<int64_t> window = std::nullopt);

// A causal attention core without documents: q [1, Hq, L, D], k and v
// [1, Hkv, L, D] -> [1, Hq, L, D] (an Attention's choice of kernel, window
// and softcap included).
using CausalAttentionCore = std::function<at::Tensor(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v)>;

// q [B, Hq, T, D], k and v [B, Hkv, T, D]: `core` over each run of `runs`
// (document_runs of the same rows), the pieces put back in place; equal to
// causal attention with those document ids, and differentiable in q, k, v
// (the pieces are split views and concatenations, so backward writes each
// gradient once). Rows that are one run go to `core` whole.
at::Tensor attend_per_document(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const DocumentRuns& runs, const CausalAttentionCore& core);

}  // namespace tessel::nn
