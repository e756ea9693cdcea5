// What the FSDP state-machine tests read: every group's training and sharded
// state as one line ("layers.0 Forward/Sharded; layers.1 ..."), taken at
// fixed points of one training step of TinyLM, so that a test writes the
// picture it expects at each point by hand ([Note: FSDP state machines] in
// src/fsdp/state_machine.h says why each is what it is).
#pragma once

#include <string>
#include <vector>

#include "fsdp/fsdp_param_group.h"
#include "fsdp/fsdp_test_model.h"
#include "fsdp/fully_shard.h"

namespace tessel::fsdp::testing {

inline std::string group_states(const std::vector<FSDPModule>& modules) {
  std::string out;
  for (const auto& m : modules) {
    const FSDPParamGroup* g = m.param_group();
    out += (out.empty() ? "" : "; ") + g->name() + " " + to_string(g->training_state()) + "/" +
           to_string(g->sharded_state());
  }
  return out;
}

struct StepTrace {
  std::string before;               // before the forward
  std::string in_second_layer;      // inside layers.1's forward (after FSDP's pre-forward)
  std::string after_forward;        // forward done, backward not begun
  std::string at_first_layer_grad;  // the gradient of layers.0's output arrives (FSDP's
                                    // pre-backward of layers.0 just ran; layers.1 is done)
  std::string after_backward;
};

// One forward and backward of `model` (at least two decoder layers) on `ids`,
// with the states of `groups` taken at each point of StepTrace.
inline StepTrace trace_step(TinyLM& model, const std::vector<FSDPModule>& groups,
                            const at::Tensor& ids) {
  StepTrace t;
  nn::Module& first = *model.decoder_layers().at(0);
  nn::Module& second = *model.decoder_layers().at(1);
  // Added after fully_shard, so these run after FSDP's hooks of the same module.
  const nn::HookHandle in_second = second.add_pre_hook([&](nn::Module&, nn::Tensors inputs) {
    t.in_second_layer = group_states(groups);
    return inputs;
  });
  const nn::HookHandle after_first =
      first.add_post_hook([&](nn::Module&, const nn::Tensors&, nn::Tensors outputs) {
        outputs[0].register_hook(
            [&](const at::Tensor&) { t.at_first_layer_grad = group_states(groups); });
        return outputs;
      });
  t.before = group_states(groups);
  at::Tensor loss = lm_loss(model.call(ids), ids);
  t.after_forward = group_states(groups);
  loss.backward();
  t.after_backward = group_states(groups);
  second.remove_hook(in_second);
  first.remove_hook(after_first);
  return t;
}

}  // namespace tessel::fsdp::testing
