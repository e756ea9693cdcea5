// The language-model head and its cross-entropy in one: per row with a
// target lse(z_i) - z_i[label_i] (or their sum), z = softcap(hidden · weightᵀ) / T, without
// the [tokens, vocabulary] logits ever existing. Both passes walk the
// vocabulary a block of columns at a time ([tokens, block] floats, at most
// about kBlockBytes): forward keeps a running log-sum-exp per row and the
// label's logit, and saves only those ([tokens] floats) beside hidden and
// weight; backward recomputes each block's logits and writes its rows of the
// weight's gradient directly, adding its share of the hidden's gradient.
//
// Why: the unfused head keeps the logits [tokens, V] for backward and makes
// their gradient of the same size; at a 150k vocabulary and 2048 tokens that
// is 1.2 GB each in float32, the largest activation of a small model's step
// (issue 40: the GPU's largest micro batch). The cost is one more product
// over the head's weight (the logits once more in backward): the head's
// share of a step's arithmetic grows by half.
//
// Arithmetic in float32 (float64 for float64 inputs) whatever the inputs'
// dtype: a block's logits are converted as they are made; the products run in
// the inputs' dtype.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace tessel::nn {

// The label of a position without a target (loss::kIgnoreIndex, which the
// loss layer defines for every objective; nn cannot include it).
inline constexpr int64_t kIgnoredLabel = -100;

// Bytes of float32 logits one block may hold: 64 MiB.
inline constexpr int64_t kLinearCrossEntropyBlockBytes = int64_t{64} << 20;

// hidden [..., H] (requires grad or not), weight [V, H], labels [...] int64
// (hidden's leading shape) with each label in [0, V) or ignore_index.
// Returns each position's lse(z) - z[label] (labels' shape; 0 where the
// label is ignore_index), in float32 (float64 for float64 inputs),
// differentiable with respect to hidden and weight under any upstream
// gradient: the negated log-probabilities a policy objective reads (DPO).
// `softcap`: z = tanh(x / cap) * cap on the logits x (Gemma's
// final_logit_softcapping). `temperature` T > 0 divides the capped logits
// (a policy's log-probs at its sampling temperature, policy/token_logprobs.h
// on the logits). `block_columns` 0: as many as fit
// kLinearCrossEntropyBlockBytes (tests pass small ones). tessel::Error for
// shapes that do not match or a label outside the vocabulary.
at::Tensor linear_cross_entropy_rows(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                                     int64_t ignore_index, std::optional<double> softcap = std::nullopt,
                                     double temperature = 1.0, int64_t block_columns = 0);

// Their sum over the positions (SFT's loss sum).
at::Tensor linear_cross_entropy_sum(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                                    int64_t ignore_index, std::optional<double> softcap = std::nullopt,
                                    double temperature = 1.0, int64_t block_columns = 0);

}  // namespace tessel::nn
