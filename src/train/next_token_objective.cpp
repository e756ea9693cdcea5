#include "train/next_token_objective.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"
#include "loss/cross_entropy.h"
#include "loss/vocab_parallel_cross_entropy.h"
#include "nn/linear_cross_entropy.h"
#include "tensor/chunking.h"

namespace tessel::train {

static_assert(nn::kIgnoredLabel == loss::kIgnoreIndex, "the fused head ignores the labels the loss layer ignores");

StepCounts NextTokenObjective::begin(const dist::DeviceMesh& mesh, const std::vector<MicroBatch>& batches) {
  int64_t valid = 0, tokens = 0;
  for (const auto& b : batches) {
    valid += b.labels.ne(loss::kIgnoreIndex).sum().item<int64_t>();
    tokens += b.num_tokens;
  }
  const auto global = sum_over_dp(mesh, {valid, tokens});
  valid_ = global[0];
  return {global[0], global[1]};
}

at::Tensor NextTokenObjective::micro_batch_loss(const ShardedModel& model, const dist::DeviceMesh& mesh,
                                                const at::Tensor& logits, const MicroBatch& piece) {
  const int64_t vocab = model.model->config().vocab_size;
  loss::LossSum ls;
  if (logits.size(-1) == vocab) {
    ls = loss::cross_entropy_sum(logits, piece.labels);
  } else {
    const auto& tp = model.tp_group;
    TESSEL_CHECK(logits.size(-1) == tensor::chunk_size(vocab, tp->size(), tp->rank()),
                 "logits have {} columns: neither the vocabulary ({}) nor this rank's tp shard of it",
                 logits.size(-1), vocab);
    ls = loss::vocab_parallel_cross_entropy_sum(logits, piece.labels,
                                                tensor::chunk_offset(vocab, tp->size(), tp->rank()), vocab, tp);
  }
  sums().add("loss", ls.sum);
  // A global batch without targets (every response truncated away) adds a
  // zero gradient instead of NaN.
  return ls.sum / static_cast<double>(std::max<int64_t>(valid_, 1));
}

at::Tensor NextTokenObjective::micro_batch_loss_of_head(const dist::DeviceMesh&, const at::Tensor& token_losses,
                                                        const MicroBatch&) {
  const at::Tensor loss_sum = token_losses.sum();
  sums().add("loss", loss_sum);
  return loss_sum / static_cast<double>(std::max<int64_t>(valid_, 1));
}

Metrics NextTokenObjective::finish(const Metrics& global_sums) {
  return {{"loss", metric(global_sums, "loss") / static_cast<double>(std::max<int64_t>(valid_, 1))}};
}

}  // namespace tessel::train
