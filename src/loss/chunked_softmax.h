// The pieces of a softmax cross-entropy over [N, V] logits computed a block
// of rows at a time, so that no more than one block of probabilities
// ([rows_per_chunk, V] floats, about 4 MiB on the CPU, 128 MiB on a device)
// exists beside the logits and their gradient. Shared by cross_entropy_sum
// (whole vocabulary on this rank) and vocab_parallel_cross_entropy_sum (a
// slice of it, the row statistics all-reduced between the two passes).
//
// Why: log_softmax + nll_loss keeps an [N, V] log-probability tensor for
// backward and its backward makes another; the tensor-parallel version kept
// exp, the shifted logits and a clone of the probabilities. Here forward
// keeps only the per-row log-sum-exp, and backward writes
// softmax - onehot(label) straight into the gradient it returns.
// Arithmetic in float32 whatever the logits' dtype (a block is converted at a
// time). Contiguous float32 logits on the CPU skip the blocks: each function
// reads every row once through the loops of loss/softmax_rows_kernel.h, and
// no probabilities are kept at all.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace tessel::loss {

// Rows per block for a vocabulary (slice) of `vocab` columns on `device`:
// blocks of ~4 MiB on the CPU (they stay in cache across a block's passes);
// of ~128 MiB on a device, where each block costs kernel launches (at a
// 128k vocabulary 4 MiB is 8 rows: thousands of launches per micro batch,
// the host's issuing the step's bound).
int64_t rows_per_chunk(int64_t vocab, c10::Device device);

// Per-row max of logits [N, V] in float32, [N] (-inf for V = 0).
at::Tensor row_max(const at::Tensor& logits);

// Per-row Σ_j exp(logits[i, j] - shift[i]), [N] float32.
at::Tensor row_sum_exp(const at::Tensor& logits, const at::Tensor& shift);

// logits[i, column[i]] in float32 where `take` [N] bool is set, else 0.
// `column` [N] int64 must be a valid column on every row (callers clamp).
at::Tensor picked_logits(const at::Tensor& logits, const at::Tensor& column, const at::Tensor& take);

// d(Σ_i scale[i] * (lse[i] - logits[i, column[i]] if take[i]))/d logits:
// scale[i] * (exp(logits[i, :] - lse[i]) - onehot(column[i]) if take[i]),
// in the logits' dtype. `lse` [N] is the full row's log-sum-exp (over every
// rank's slice), `scale` [N] float32 (0 on ignored rows).
at::Tensor softmax_cross_entropy_grad(const at::Tensor& logits, const at::Tensor& lse, const at::Tensor& column,
                                      const at::Tensor& take, const at::Tensor& scale);

}  // namespace tessel::loss
