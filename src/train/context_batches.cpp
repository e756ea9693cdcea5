#include "train/context_batches.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "loss/cross_entropy.h"
#include "parallel/load_balanced_chunks.h"

namespace tessel::train {

namespace {

// `x` [B, T] (or [T]) with `extra` tokens of `value` appended along the last dim.
at::Tensor pad_tokens(const at::Tensor& x, int64_t extra, int64_t value) {
  if (extra == 0) return x;
  auto sizes = x.sizes().vec();
  sizes.back() = extra;
  return at::cat({x, at::full(sizes, value, x.options())}, -1);
}

}  // namespace

MicroBatch context_parallel_slice(const MicroBatch& batch, int cp_size, int cp_rank) {
  if (cp_size == 1) return batch;
  TESSEL_CHECK(batch.input_ids.dim() == 2, "context parallelism cuts [batch, seq] rows, got input_ids of {} dims",
               batch.input_ids.dim());
  const int64_t T = batch.input_ids.size(1);
  const int64_t padded = parallel::load_balanced_row_length(T, cp_size);
  const int64_t extra = padded - T;
  auto take = [&](const at::Tensor& x) { return parallel::take_load_balanced_chunks(x, -1, cp_size, cp_rank); };

  MicroBatch out;
  out.input_ids = take(pad_tokens(batch.input_ids, extra, 0));
  out.labels = take(pad_tokens(batch.labels, extra, loss::kIgnoreIndex));
  // Padding continues the positions (0 in packed rows); nothing attends to it.
  at::Tensor positions = batch.position_ids.defined()
                             ? pad_tokens(batch.position_ids, extra, 0)
                             : at::arange(padded, batch.input_ids.options().dtype(at::kLong));
  out.position_ids = take(positions);
  if (batch.document_ids.defined()) out.document_ids = take(pad_tokens(batch.document_ids, extra, -1));
  if (batch.attention_mask.defined()) out.attention_mask = take(pad_tokens(batch.attention_mask, extra, 0));
  // Per-token values are cut like the labels (their padding counts for
  // nothing: no target is there); per-row values stay whole.
  for (const auto& [name, values] : batch.token_values) out.token_values[name] = take(pad_tokens(values, extra, 0));
  out.row_values = batch.row_values;
  out.num_tokens = batch.num_tokens;  // of the whole rows: train_step counts before cutting
  return out;
}

}  // namespace tessel::train
