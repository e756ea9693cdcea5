// Activation checkpointing: run a module's forward without keeping its
// activations, and recompute them in backward. Module::call() uses this when
// set_activation_checkpointing(true); the semantics for hooks are described
// at the top of nn/module.h.
//
// The autograd function stores only the module's inputs. In backward it
// re-runs forward() with grad enabled (in_recompute() is true meanwhile) and
// back-propagates through the fresh graph; parameter gradients accumulate
// into .grad as in an ordinary backward, input gradients are returned. No RNG
// state is saved: tessel's models have no dropout.
#pragma once

#include "nn/module.h"

namespace tessel::nn {

// Runs module.forward(inputs) under activation checkpointing when grad mode is
// on; a plain forward otherwise. Does not run the module's hooks (call() does).
// The module must outlive the backward pass of the returned outputs.
Tensors checkpointed_forward(Module& module, const Tensors& inputs);

namespace detail {
struct ModuleAccess {
  static Tensors forward(Module& module, const Tensors& inputs) { return module.forward(inputs); }
};
}  // namespace detail

}  // namespace tessel::nn
