// FSDP's state machines over real ranks ([Note: FSDP state machines] in
// src/fsdp/state_machine.h): the states every group goes through in a step
// whose all-gathers cross processes, for each reshard_after_forward variant
// the world allows: true (Sharded after forward), false (Unsharded) and, at 4
// ranks, 2 (ShardedPostForward: a half kept over a 2-rank subgroup, gathered
// back for backward). The states at each point are written out by hand.
#include <gtest/gtest.h>

#include "fsdp/fsdp_parity.h"
#include "fsdp/state_trace.h"

namespace tessel::fsdp::testing {
namespace {

StepTrace trace_with(const std::variant<bool, int>& reshard_after_forward, int steps) {
  const Groups& g = groups_for(1);
  const int64_t vocab = vocab_for(g.world->size());
  auto model = make_model(vocab, 2, 5);
  FSDPMesh mesh(g.shard);
  FSDPOptions options;
  options.reshard_after_forward = reshard_after_forward;
  std::vector<FSDPModule> groups;
  for (const auto& layer : model->decoder_layers())
    groups.push_back(fully_shard(*layer, mesh, options));
  groups.push_back(fully_shard(*model, mesh, options));
  StepTrace t;
  for (int step = 0; step < steps; ++step)
    t = trace_step(*model, groups, batch(vocab, step, 0, g.world->rank()));
  return t;
}

TEST(FsdpStateMachineMpi, ReshardAfterForward) {
  // The second step prefetches in forward and backward.
  expect_resharding_step(trace_with(true, 2));
}

TEST(FsdpStateMachineMpi, KeepAfterForward) { expect_keeping_step(trace_with(false, 2)); }

TEST(FsdpStateMachineMpi, KeepASliceAfterForward) {
  if (dist::world()->size() != 4)
    GTEST_SKIP() << "a 2-rank slice group strictly inside the shard group needs 4 ranks";
  const StepTrace t = trace_with(2, 2);
  EXPECT_EQ(t.in_second_layer,
            "layers.0 Forward/ShardedPostForward; layers.1 Forward/Unsharded; "
            "<root TinyLM> Forward/Unsharded");
  EXPECT_EQ(t.after_forward,
            "layers.0 Forward/ShardedPostForward; layers.1 Forward/ShardedPostForward; "
            "<root TinyLM> Forward/Unsharded");
  expect_backward_and_end(t);
}

}  // namespace
}  // namespace tessel::fsdp::testing
