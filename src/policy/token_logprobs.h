// The log-probability of each position's target token, log softmax(logits /
// temperature)[target], differentiable, from logits that hold the whole
// vocabulary or (under tensor parallelism) this rank's slice of it.
//
// The policy losses (SPEC 11) need per-token log-probs where SFT needs only a
// sum of cross-entropies; the arithmetic is the same (log p = -CE) and so is
// the memory plan (loss/chunked_softmax.h): rows are processed a block at a
// time, so beside the logits and their gradient no more than one block of
// float32 probabilities (about 4 MiB) exists, whatever the logits' dtype and
// the temperature. Under tensor parallelism the row max, the sums of
// exponentials and the target's logit are all-reduced over the group ([N]
// floats, two all-reduces): the [N, V] logits are never gathered. Backward is
// local: (onehot - softmax(logits / T)) / T times the incoming gradient.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "dist/communicator.h"

namespace tessel::policy {

// Which columns of the vocabulary the logits hold. A null group (or one of
// size 1) with offset 0 and the logits' own width: the whole vocabulary.
struct VocabSlice {
  int64_t offset = 0;      // first vocabulary row of the local logits
  int64_t vocab_size = 0;  // the whole vocabulary
  dist::CommunicatorPtr group;  // the ranks holding the other slices (tp)
};

// logits [N, V_local] (any float dtype), targets [N] int64 global token ids,
// negative = no target (its log-prob is 0 and gets no gradient). Returns [N]
// float32, the same on every rank of the slice group. temperature > 0.
// Targets outside [0, vocab_size) throw tessel::Error naming the value.
at::Tensor token_logprobs(const at::Tensor& logits, const at::Tensor& targets, double temperature,
                          const VocabSlice& slice);

}  // namespace tessel::policy
