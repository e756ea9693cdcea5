// FSDP's state machines ([Note: FSDP state machines] in
// src/fsdp/state_machine.h): which transitions are legal.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "fsdp/state_machine.h"

namespace tessel::fsdp::testing {
namespace {

TEST(FsdpStateMachine, LegalTransitions) {
  using T = TrainingState;
  const std::set<std::pair<T, T>> legal_training{
      {T::Idle, T::Idle},           {T::Idle, T::Forward},         {T::Forward, T::Forward},
      {T::Forward, T::PreBackward}, {T::Forward, T::PostBackward}, {T::PreBackward, T::PostBackward},
      {T::PostBackward, T::Idle}};
  for (T from : {T::Idle, T::Forward, T::PreBackward, T::PostBackward}) {
    for (T to : {T::Idle, T::Forward, T::PreBackward, T::PostBackward}) {
      EXPECT_EQ(is_legal_transition(from, to), legal_training.count({from, to}) == 1)
          << to_string(from) << " -> " << to_string(to);
    }
  }
  using S = ShardedState;
  const std::set<std::pair<S, S>> legal_sharded{
      {S::Sharded, S::Sharded},   {S::ShardedPostForward, S::Sharded},   {S::Unsharded, S::Sharded},
      {S::Sharded, S::Unsharded}, {S::ShardedPostForward, S::Unsharded}, {S::Unsharded, S::Unsharded},
      {S::Unsharded, S::ShardedPostForward}};
  for (S from : {S::Sharded, S::ShardedPostForward, S::Unsharded}) {
    for (S to : {S::Sharded, S::ShardedPostForward, S::Unsharded}) {
      EXPECT_EQ(is_legal_transition(from, to), legal_sharded.count({from, to}) == 1)
          << to_string(from) << " -> " << to_string(to);
    }
  }
}

}  // namespace
}  // namespace tessel::fsdp::testing
