// FSDP's state machines ([Note: FSDP state machines] in
// src/fsdp/state_machine.h) in one process: the legal transitions, the states
// every group goes through in a step (resharded after forward or not, with
// gradient accumulation without sync, with an activation-checkpointed layer
// whose nested group is armed in the recompute), and illegal transitions
// refused with the group's module path and both states. The states at each
// point are written out by hand from the note; reshard_after_forward = k, the
// one variant that needs several ranks, is in mpi/state_machine_test.cpp.
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "fsdp/state_trace.h"
#include "nn/checkpoint.h"

namespace tessel::fsdp::testing {
namespace {

constexpr int64_t kVocab = 9;

// fully_shard on each decoder layer, then the root; the handles in that order.
std::vector<FSDPModule> shard(TinyLM& model, const FSDPOptions& options = {}) {
  std::vector<FSDPModule> groups;
  for (const auto& layer : model.decoder_layers())
    groups.push_back(fully_shard(*layer, FSDPMesh(dist::world()), options));
  groups.push_back(fully_shard(model, FSDPMesh(dist::world()), options));
  return groups;
}

nn::Module& child(nn::Module& module, const std::string& name) {
  for (const auto& item : module.named_children()) {
    if (item.key() == name) return dynamic_cast<nn::Module&>(*item.value());
  }
  throw std::runtime_error("no child " + name);
}

// Every (from, to) pair of `states`: legal exactly when listed in `legal`.
template <typename State>
void expect_legal_exactly(const std::vector<State>& states,
                          const std::set<std::pair<State, State>>& legal) {
  for (State from : states) {
    for (State to : states) {
      EXPECT_EQ(is_legal_transition(from, to), legal.count({from, to}) == 1)
          << to_string(from) << " -> " << to_string(to);
    }
  }
}

TEST(FsdpStateMachine, LegalTransitions) {
  using T = TrainingState;
  expect_legal_exactly<T>({T::Idle, T::Forward, T::PreBackward, T::PostBackward},
                          {{T::Idle, T::Idle},
                           {T::Idle, T::Forward},
                           {T::Forward, T::Forward},
                           {T::Forward, T::PreBackward},
                           {T::Forward, T::PostBackward},
                           {T::PreBackward, T::PostBackward},
                           {T::PostBackward, T::Idle}});
  using S = ShardedState;
  expect_legal_exactly<S>({S::Sharded, S::ShardedPostForward, S::Unsharded},
                          {{S::Sharded, S::Sharded},
                           {S::ShardedPostForward, S::Sharded},
                           {S::Unsharded, S::Sharded},
                           {S::Sharded, S::Unsharded},
                           {S::ShardedPostForward, S::Unsharded},
                           {S::Unsharded, S::Unsharded},
                           {S::Unsharded, S::ShardedPostForward}});
}

TEST(FsdpStateMachine, StepWithReshardAfterForward) {
  auto model = make_model(kVocab, 2, 7);
  const auto groups = shard(*model);
  for (int step = 0; step < 2; ++step) {  // the second with the forward prefetch
    SCOPED_TRACE(::testing::Message() << "step " << step);
    expect_resharding_step(trace_step(*model, groups, batch(kVocab, step, 0, 0)));
  }
}

TEST(FsdpStateMachine, StepKeepingParametersAfterForward) {
  auto model = make_model(kVocab, 2, 7);
  FSDPOptions keep;
  keep.reshard_after_forward = false;
  const auto groups = shard(*model, keep);
  expect_keeping_step(trace_step(*model, groups, batch(kVocab, 0, 0, 0)));
}

// A forward without gradients records no graph: the states stay Idle (only
// the sharded state moves, and comes back).
TEST(FsdpStateMachine, ForwardWithoutGradLeavesTheTrainingStateIdle) {
  auto model = make_model(kVocab, 2, 7);
  const auto groups = shard(*model);
  at::NoGradGuard no_grad;
  model->call(batch(kVocab, 0, 0, 0));
  EXPECT_EQ(group_states(groups),
            "layers.0 Idle/Sharded; layers.1 Idle/Sharded; <root TinyLM> Idle/Unsharded");
}

// Micro batches without sync take the same path; only what post-backward does
// with the gradients differs (kept whole until the last micro batch).
TEST(FsdpStateMachine, GradientAccumulationWithoutSync) {
  auto model = make_model(kVocab, 2, 7);
  const auto groups = shard(*model);
  FSDPModule root = groups.back();
  for (int micro = 0; micro < 2; ++micro) {
    SCOPED_TRACE(::testing::Message() << "micro batch " << micro);
    const bool last = micro == 1;
    root.set_requires_gradient_sync(last);
    expect_resharding_step(trace_step(*model, groups, batch(kVocab, 0, micro, 0)));
    for (const auto& g : groups) {
      for (const FSDPParam* p : g.param_group()->params()) {
        EXPECT_EQ(p->sharded_param().grad().defined(), last) << p->fqn();
        EXPECT_EQ(p->unsharded_accumulated_grad.defined(), !last) << p->fqn();
      }
    }
  }
}

// The checkpointed layer's own hooks run once, outside its recompute; a group
// nested inside it (as an expert under expert parallelism) runs its ordinary
// forward without grad (stays Idle) and is armed when backward recomputes
// the layer (Idle -> Forward), then reduces its gradients from Forward.
TEST(FsdpStateMachine, ActivationCheckpointRecomputeArmsANestedGroup) {
  auto reference = make_model(kVocab, 2, 7);
  const at::Tensor ids = batch(kVocab, 0, 0, 0);
  lm_loss(reference->call(ids), ids).backward();
  const at::Tensor want = child(*reference->decoder_layers()[0], "up").parameter("weight").grad();

  auto model = make_model(kVocab, 2, 7);
  nn::Module& layer = *model->decoder_layers()[0];
  nn::Module& up = child(layer, "up");
  std::vector<FSDPModule> groups{fully_shard(up, FSDPMesh(dist::world()))};
  for (const auto& g : shard(*model)) groups.push_back(g);
  layer.set_activation_checkpointing(true);
  std::string in_recompute;
  up.add_post_hook([&](nn::Module&, const nn::Tensors&, nn::Tensors outputs) {
    if (nn::in_recompute()) in_recompute = group_states(groups);
    return outputs;
  });
  at::Tensor loss = lm_loss(model->call(ids), ids);
  EXPECT_EQ(group_states(groups),
            "layers.0.up Idle/Sharded; layers.0 Forward/Sharded; layers.1 Forward/Sharded; "
            "<root TinyLM> Forward/Unsharded");
  loss.backward();
  EXPECT_EQ(in_recompute,
            "layers.0.up Forward/Unsharded; layers.0 PreBackward/Unsharded; "
            "layers.1 PostBackward/Sharded; <root TinyLM> PreBackward/Unsharded");
  EXPECT_EQ(group_states(groups), std::string("layers.0.up Idle/Sharded; ") + kAllIdleSharded);
  // The nested group's gradients were reduced: those of the plain model.
  const at::Tensor got = up.parameter("weight").grad();
  ASSERT_TRUE(got.defined());
  EXPECT_TRUE(at::allclose(got, want, 1e-5, 1e-6));
}

void expect_error_naming(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const tessel::Error& e) {
    for (const auto& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(FsdpStateMachine, IllegalTransitionThrowsNamingGroupAndStates) {
  auto model = make_model(kVocab, 2, 7);
  const auto groups = shard(*model);
  expect_error_naming(
      [&] { groups[0].param_group()->set_training_state(TrainingState::PostBackward); },
      {"fully_shard(layers.0): training state Idle -> PostBackward is not a legal transition",
       "no forward with gradients has armed"});
  EXPECT_EQ(groups[0].param_group()->training_state(), TrainingState::Idle);  // unchanged
}

// A second backward through the same graph reaches the root's outputs after
// its first backward ended (Idle): refused, instead of gathering again and
// reducing nothing.
TEST(FsdpStateMachine, SecondBackwardThroughTheSameGraphIsRefused) {
  auto model = make_model(kVocab, 2, 7);
  const auto groups = shard(*model);
  const at::Tensor ids = batch(kVocab, 0, 0, 0);
  at::Tensor loss = lm_loss(model->call(ids), ids);
  loss.backward({}, /*retain_graph=*/true);
  expect_error_naming([&] { loss.backward(); },
                      {"fully_shard(<root TinyLM>): training state Idle -> PreBackward",
                       "a second backward through the same graph is not supported"});
}

}  // namespace
}  // namespace tessel::fsdp::testing
