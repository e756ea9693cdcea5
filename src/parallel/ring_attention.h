// Causal attention over rows split across the context-parallel group (SPEC 2,
// ring attention). Each cp rank holds its two load-balanced chunks of every
// row (load_balanced_chunks.h) as q, k and v. The ranks pass their K/V around
// the group's ring: in step s a rank attends its queries to the K/V block of
// rank (r - s) mod cp while the next block is already on its way
// (Communicator::ring_shift_async), and folds each block into a running
// output and log-sum-exp (nn/attention_blocks.h), so the result equals
// attention over the whole row. Chunk pairs the causal mask or the sliding
// window hides entirely are skipped: with the load-balanced chunks every rank
// computes the same number of blocks.
//
// Backward recomputes each block's probabilities from the saved final
// log-sum-exp (nothing of size T x T is kept between forward and backward)
// and passes K/V around the ring again, each block travelling with the
// gradient of its K/V accumulated so far; a last shift hands every block's
// gradient back to its owner. Saved per layer: the local q, k, v, output and
// log-sum-exp, so activation memory falls as 1/cp.
//
// Packed rows: the document ids of the local tokens are gathered over the
// group once per call (B x T integers), so a key block is masked by its own
// documents.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "dist/communicator.h"

namespace tessel::parallel {

// Where a run's ring attention spent its time, summed over calls: compute
// of the blocks, waiting for shifts that were not done when their block was
// needed (the transfer left exposed, plus any lag of the sending rank), the
// bytes this rank sent, and how many shifts had already arrived when their
// data was needed (their transfer was hidden entirely). For the benchmark's
// overlap figures.
struct RingAttentionStats {
  double compute_seconds = 0;
  double waiting_seconds = 0;
  int64_t bytes_sent = 0;
  int64_t shifts = 0;
  int64_t shifts_done_when_needed = 0;
};

struct RingAttentionOptions {
  double scale = 1.0;
  std::optional<int64_t> sliding_window;
  std::optional<double> logit_softcap;
  std::shared_ptr<RingAttentionStats> stats;  // optional
};

// q [B, Hq, T_local, D], k and v [B, Hkv, T_local, D] (T_local = 2 chunks),
// document_ids [B, T_local] or undefined. Returns [B, Hq, T_local, D] in q's
// dtype; differentiable in q, k and v. Collective over `cp`: every rank
// calls it with the same shapes.
at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& document_ids, const dist::CommunicatorPtr& cp,
                          const RingAttentionOptions& options);

}  // namespace tessel::parallel
