// Causal attention on one process, computed one tile of query rows at a time
// against only the keys the tile can see, with a hand-written backward that
// recomputes the probabilities (the default attention core of Attention when
// the sequence is not split over ranks).
//
// Why: causal_attention builds each kv head's full [B, group, T, T] scores,
// masks half of them away, and autograd keeps the scores and probabilities
// of every layer for backward. Here query tile [t0, t1) is scored against
// keys [first visible, t1) only (the causal upper triangle beyond the tile is
// never computed: at T = 256 and 64-row tiles 62% of the score work), the
// softmax of each row is complete within its tile (no merging), and only q,
// k, v, the output and the per-row log-sum-exp are kept for backward. K/V
// heads are shared by their query group through the blocks of
// nn/attention_blocks.h (no repeated K/V).
//
// The mask is causal_attention's: causal, an optional sliding window
// (query i sees key j iff i - window < j <= i), optional document ids
// [B, T] (packed rows; padding is a document of its own) and optional logit
// softcapping. Arithmetic in float32 (float64 for float64 inputs), the
// result in q's dtype.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace tessel::nn {

// Rows per query tile unless the caller says otherwise; measured on
// bench-medium (docs/bench/vs_pytorch.md, 2026-12-02).
constexpr int64_t kDefaultQueryTile = 64;

// q [B, Hq, T, D], k and v [B, Hkv, T, D] (Hkv divides Hq). Returns
// [B, Hq, T, D]; differentiable in q, k and v.
at::Tensor tiled_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                  std::optional<int64_t> sliding_window = std::nullopt,
                                  std::optional<double> logit_softcap = std::nullopt,
                                  const at::Tensor& document_ids = {}, int64_t query_tile = kDefaultQueryTile);

// How many softmax probabilities tiled_causal_attention keeps for backward
// per batch row of T tokens (all query heads; float32, float64 for float64
// inputs), or 0 where it recomputes them: for the planner's memory terms
// (cli/step_prediction.h). `element_bytes`: q's element size.
int64_t tiled_attention_kept_probabilities(int64_t T, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                                          int64_t element_bytes, std::optional<int64_t> sliding_window,
                                          int64_t query_tile = kDefaultQueryTile);

}  // namespace tessel::nn
