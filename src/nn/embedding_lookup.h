// The embedding lookup with its weight gradient added in place.
//
// Autograd's embedding backward materialises a dense [vocab, hidden]
// gradient (zeros plus the rows of this batch's tokens) and hands it to the
// weight's accumulator. With a tied embedding and lm_head that accumulator has
// two inputs, so the engine holds the head's [vocab, hidden] gradient in its
// input buffer through the whole backward and adds the embedding's to it out
// of place: three vocabulary-sized tensors at once at the end of backward
// (for Qwen2.5-0.5B, 1.5 GiB beyond the gradient itself). Here the lookup
// has no autograd edge to the weight: its backward adds the gradient rows
// into weight.grad (index_add_), creating .grad only when nothing is there
// yet. The head's gradient then reaches .grad as soon as the head's backward
// is done, and the embedding's costs only its rows. The node hangs off a
// zero-element anchor tensor (it needs an input that requires grad); the
// anchor receives no gradient.
#pragma once

#include <ATen/core/Tensor.h>

namespace tessel::nn {

// at::embedding(weight, ids). `weight` is the parameter as registered at call
// time (FSDP's unsharded one, say): backward adds to its .grad. `anchor`: a
// zero-element tensor that requires grad (one per module, reused).
at::Tensor embedding_with_inplace_grad(const at::Tensor& weight, const at::Tensor& ids, const at::Tensor& anchor);

}  // namespace tessel::nn
