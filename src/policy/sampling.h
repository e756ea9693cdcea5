// Choosing the next token of each row from its logits (policy/generation.h):
// greedy, or sampled with temperature, top-k and top-p, as vLLM's and Hugging
// Face's samplers define them:
//
//   z = logits / temperature
//   top-k: keep the k largest z                       (top_k <= 0: all)
//   top-p: of those, renormalised, keep the smallest set of the most likely
//          tokens whose probabilities reach top_p   (top_p >= 1: all)
//   draw one of the kept tokens with probability proportional to softmax(z)
//
// and each token's log-probability, log softmax(z)[token] before top-k and
// top-p: what get_logprobs (policy/logprobs.h) computes for the same token at
// the same temperature, so GRPO's generation and policy log-probs compare
// like with like. Greedy decoding takes argmax z with temperature 1.
//
// Reproducibility: the draw of row r at step t is one uniform number from a
// counter-based hash of (seed, stream of r, t), where a row's stream is its
// index in the whole batch. It does not depend on which rank decodes the row,
// on the other rows of its batch or on the device, so the same seed gives the
// same tokens on every layout (up to logits that differ by rounding across a
// boundary between two tokens' probability intervals).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::policy {

struct SamplingOptions {
  bool greedy = false;
  double temperature = 1.0;  // > 0; unused when greedy
  int64_t top_k = 0;         // <= 0: off
  double top_p = 1.0;        // in (0, 1]; 1: off
  uint64_t seed = 0;
};

// UsageError naming the option when a value is out of range (`where` prefixes
// the option names, e.g. "policy.generation." or "--").
void check_sampling_options(const SamplingOptions& options, const std::string& where);

// A uniform number in [0, 1) for (seed, stream, step), from 53 bits of a
// SplitMix64-style hash: the same on every machine and rank.
double uniform_draw(uint64_t seed, int64_t stream, int64_t step);

struct SampledTokens {
  at::Tensor tokens;    // [B] int64
  at::Tensor logprobs;  // [B] float32: log softmax(logits / T)[token] (T = 1 when greedy)
};

// logits [B, V] over the whole vocabulary (any float dtype, any device);
// `streams` holds each row's stream. Results on the logits' device.
SampledTokens sample_tokens(const at::Tensor& logits, const SamplingOptions& options,
                            const std::vector<int64_t>& streams, int64_t step);

}  // namespace tessel::policy
