// Causal attention computed one (query block, key block) pair at a time, with
// the softmax carried as a log-sum-exp per query row, so the pieces of one
// row's softmax can come from different places and be merged exactly
// (context parallelism's ring, parallel/ring_attention.h). Nothing here
// communicates; the tensors of a block are plain local tensors.
//
// A block of queries or keys is a contiguous run of sequence positions: its
// tokens sit at global indices start, start+1, ... of the whole row. The mask
// is causal on those global indices (key j visible from query i iff j <= i),
// narrowed by a sliding window (i - j < window) and by documents (packed
// rows: equal document ids only), exactly as causal_attention's mask over the
// whole row. A block's rows that see no key of the block get lse = -inf and a
// zero output, which merging treats as "no contribution".
//
// Arithmetic is in the dtype the caller passes (fp32 for fp32 and 16-bit
// inputs, fp64 for fp64: the softmax dtype of causal_attention).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace tessel::nn {

struct AttentionBlockMask {
  int64_t query_start = 0;  // global index of the block's first query
  int64_t key_start = 0;    // global index of the block's first key
  std::optional<int64_t> sliding_window;
  at::Tensor query_documents;  // [B, Tq] integer, or undefined (one document per row)
  at::Tensor key_documents;    // [B, Tk] integer, defined iff query_documents is
};

// How much of a block the mask lets through, from the index ranges alone.
enum class BlockVisibility { None, Full, Partial };
BlockVisibility block_visibility(const AttentionBlockMask& mask, int64_t query_len, int64_t key_len);

struct AttentionScoring {
  double scale = 1.0;                   // multiplier of q·k
  std::optional<double> logit_softcap;  // scores -> cap * tanh(scores / cap)
};

// q [B, Hq, Tq, D] against k, v [B, Hkv, Tk, D] (Hkv divides Hq, as in
// causal_attention). Returns {out [B, Hq, Tq, D] normalised within the block,
// lse [B, Hq, Tq]}. The caller skips BlockVisibility::None blocks.
struct AttentionBlockResult {
  at::Tensor out;
  at::Tensor lse;
  // Only when asked for and available (see attention_block_forward): the
  // block's softmax probabilities, normalised within the block, as
  // [B * Hkv, group * Tq, Tk] (a kv head's query heads folded into rows).
  at::Tensor probabilities;
};
// Kv heads are processed together, as many at a time as keep their scores
// within `score_bytes_budget` (at least one).
constexpr int64_t kDefaultScoreBytesBudget = int64_t{4} << 20;
// With `keep_probabilities` the result carries the probabilities when every
// kv head fits one run of the budget and there is no softcap (whose backward
// needs the raw scores); backward can then take them instead of computing
// them again (one product and the exponentials fewer).
AttentionBlockResult attention_block_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             const AttentionBlockMask& mask, const AttentionScoring& scoring,
                                             int64_t score_bytes_budget = kDefaultScoreBytesBudget,
                                             bool keep_probabilities = false);

// Folds a block's result into the running one of the same query rows, in
// place: afterwards `out`/`lse` are the attention over the keys of both.
// `out` and `lse` start as zeros and -inf.
void merge_attention_block(const at::Tensor& out, const at::Tensor& lse, const AttentionBlockResult& block);

// The gradients of one block's share of the attention output. `lse` is the
// FINAL log-sum-exp of the query rows (over every key block) and `delta` the
// row sums of dout * out over D ([B, Hq, Tq]): with them each block's softmax
// probabilities are recomputed exactly and the gradient splits into a sum
// over blocks. Returns dq [B, Hq, Tq, D] and dk, dv [B, Hkv, Tk, D].
// `probabilities`, when defined, are the forward's kept ones for this block
// (AttentionBlockResult::probabilities): valid only where the block's lse is
// the final one, i.e. the block holds every key its rows see.
struct AttentionBlockGrads {
  at::Tensor dq, dk, dv;
};
AttentionBlockGrads attention_block_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             const at::Tensor& dout, const at::Tensor& lse,
                                             const at::Tensor& delta, const AttentionBlockMask& mask,
                                             const AttentionScoring& scoring,
                                             int64_t score_bytes_budget = kDefaultScoreBytesBudget,
                                             const at::Tensor& probabilities = {});

}  // namespace tessel::nn
