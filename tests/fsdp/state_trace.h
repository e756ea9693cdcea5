// What the FSDP state-machine tests read: every group's training and sharded
// state as one line ("layers.0 Forward/Sharded; layers.1 ..."), taken at
// fixed points of one training step of TinyLM, so that a test writes the
// picture it expects at each point by hand ([Note: FSDP state machines] in
// src/fsdp/state_machine.h says why each is what it is).
#pragma once

#include <gtest/gtest.h>

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

// The pictures of a step of a two-layer TinyLM (groups layers.0, layers.1,
// root), written out by hand from the note.
inline constexpr const char* kAllIdleSharded =
    "layers.0 Idle/Sharded; layers.1 Idle/Sharded; <root TinyLM> Idle/Sharded";

// Whatever stayed in memory after forward: when layers.0's output gradient
// arrives, layers.1 has reduced and resharded, layers.0 is gathered again for
// its backward, and the root (whose post-backward is the final callback's) is
// still gathered; at the end every group is Idle and Sharded.
inline void expect_backward_and_end(const StepTrace& t) {
  EXPECT_EQ(t.at_first_layer_grad,
            "layers.0 PreBackward/Unsharded; layers.1 PostBackward/Sharded; "
            "<root TinyLM> PreBackward/Unsharded");
  EXPECT_EQ(t.after_backward, kAllIdleSharded);
}

// A step with reshard_after_forward = true: each layer Sharded again after its
// forward, the root kept (it is used first in backward).
inline void expect_resharding_step(const StepTrace& t) {
  EXPECT_EQ(t.before, kAllIdleSharded);
  EXPECT_EQ(
      t.in_second_layer,
      "layers.0 Forward/Sharded; layers.1 Forward/Unsharded; <root TinyLM> Forward/Unsharded");
  EXPECT_EQ(t.after_forward,
            "layers.0 Forward/Sharded; layers.1 Forward/Sharded; <root TinyLM> Forward/Unsharded");
  expect_backward_and_end(t);
}

// A step with reshard_after_forward = false: every group stays gathered from
// its forward until its post-backward.
inline void expect_keeping_step(const StepTrace& t) {
  EXPECT_EQ(t.before, kAllIdleSharded);
  EXPECT_EQ(
      t.in_second_layer,
      "layers.0 Forward/Unsharded; layers.1 Forward/Unsharded; <root TinyLM> Forward/Unsharded");
  EXPECT_EQ(
      t.after_forward,
      "layers.0 Forward/Unsharded; layers.1 Forward/Unsharded; <root TinyLM> Forward/Unsharded");
  expect_backward_and_end(t);
}

}  // namespace tessel::fsdp::testing
