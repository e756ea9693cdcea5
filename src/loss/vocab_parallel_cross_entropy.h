// Cross-entropy on vocab-sharded logits, without gathering them.
//
// Under tensor parallelism lm_head is column-parallel: rank r of the tp group
// holds logits for vocabulary rows [offset_r, offset_r + V_r) only. Gathering
// [tokens, V] logits costs tp x the memory of the local slice; instead the
// softmax normaliser and the target logit are assembled with three small
// all-reduces over [tokens] (max, sum of exponentials, target logit), and the
// backward pass is local: softmax_local - onehot_local, scaled.
#pragma once

#include <ATen/core/Tensor.h>

#include "dist/communicator.h"
#include "loss/cross_entropy.h"

namespace tessel::loss {

// local_logits: [..., V_local] this rank's vocabulary slice starting at
// vocab_offset; labels: [...] global token ids (or ignore_index), the same on
// every rank of `tp_group`. Returns the same LossSum as cross_entropy_sum on
// the full logits, on every rank; the gradient flows to local_logits only.
LossSum vocab_parallel_cross_entropy_sum(const at::Tensor& local_logits, const at::Tensor& labels,
                                         int64_t vocab_offset, int64_t global_vocab,
                                         const dist::CommunicatorPtr& tp_group,
                                         int64_t ignore_index = kIgnoreIndex);

}  // namespace tessel::loss
