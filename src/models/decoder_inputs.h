// What every decoder layer hands its self-attention: the layer takes
// {hidden, cos, sin[, document_ids]} (document_ids only for packed rows) and
// its attention takes the same list with the normed hidden state first.
// Parallel styles only rewrite input 0, so the trailing inputs pass through.
#pragma once

#include "core/error.h"
#include "nn/module.h"

namespace tessel::models {

// The inputs of the layer's self_attn: {normed, cos, sin[, document_ids]}.
// tessel::Error naming the layer when `layer_inputs` has the wrong arity.
inline nn::Tensors attention_inputs(const nn::Module& layer, const nn::Tensors& layer_inputs, at::Tensor normed) {
  TESSEL_CHECK(layer_inputs.size() == 3 || layer_inputs.size() == 4,
               "decoder layer {} takes {{hidden, cos, sin[, document_ids]}}, got {} inputs", layer.path(),
               layer_inputs.size());
  nn::Tensors out{std::move(normed), layer_inputs[1], layer_inputs[2]};
  if (layer_inputs.size() == 4) out.push_back(layer_inputs[3]);
  return out;
}

}  // namespace tessel::models
