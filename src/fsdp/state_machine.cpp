#include "fsdp/state_machine.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tessel::fsdp {

const char* to_string(TrainingState state) {
  switch (state) {
    case TrainingState::Idle:
      return "Idle";
    case TrainingState::Forward:
      return "Forward";
    case TrainingState::PreBackward:
      return "PreBackward";
    case TrainingState::PostBackward:
      return "PostBackward";
  }
  return "?";
}

const char* to_string(ShardedState state) {
  switch (state) {
    case ShardedState::Sharded:
      return "Sharded";
    case ShardedState::ShardedPostForward:
      return "ShardedPostForward";
    case ShardedState::Unsharded:
      return "Unsharded";
  }
  return "?";
}

bool is_legal_transition(TrainingState from, TrainingState to) {
  using T = TrainingState;
  switch (from) {
    case T::Idle:
      return to == T::Idle || to == T::Forward;
    case T::Forward:
      return to == T::Forward || to == T::PreBackward || to == T::PostBackward;
    case T::PreBackward:
      return to == T::PostBackward;
    case T::PostBackward:
      return to == T::Idle;
  }
  return false;
}

bool is_legal_transition(ShardedState from, ShardedState to) {
  using S = ShardedState;
  if (to == S::Sharded) return true;
  if (to == S::Unsharded) return true;
  return from == S::Unsharded;  // only unsharded data can leave a slice behind
}

namespace {

// What an illegal transition means, in terms of the step.
const char* why(TrainingState from, TrainingState to) {
  using T = TrainingState;
  if (to == T::Forward) {
    return "a forward with gradients began while this group's backward was still under way (the "
           "previous backward did not end with the root's final callback, e.g. it was interrupted "
           "by an exception); run each backward to its end before the next forward";
  }
  if (to == T::PreBackward && from == T::Idle) {
    return "backward reached this group's outputs, but no forward with gradients has run since "
           "its last backward ended (a second backward through the same graph is not supported: "
           "run the forward again)";
  }
  if (to == T::PostBackward) {
    return from == T::PostBackward
               ? "this group's gradients were already handed to the reduction in this backward"
               : "no forward with gradients has armed this group's post-backward";
  }
  if (to == T::Idle) {
    return "the backward ended before this group's post-backward reduced its gradients";
  }
  return "see [Note: FSDP state machines] in fsdp/state_machine.h";
}

const char* why(ShardedState from, ShardedState to) {
  return from == ShardedState::ShardedPostForward
             ? "a slice is kept already; only unsharded parameters can be resharded to a slice"
             : "there are no unsharded parameters to keep a slice of (they were not gathered)";
}

}  // namespace

void check_transition(const std::string& group, TrainingState from, TrainingState to) {
  if (is_legal_transition(from, to)) return;
  throw Error(fmt::format("fully_shard({}): training state {} -> {} is not a legal transition: {}",
                          group, to_string(from), to_string(to), why(from, to)));
}

void check_transition(const std::string& group, ShardedState from, ShardedState to) {
  if (is_legal_transition(from, to)) return;
  throw Error(fmt::format("fully_shard({}): sharded state {} -> {} is not a legal transition: {}",
                          group, to_string(from), to_string(to), why(from, to)));
}

}  // namespace tessel::fsdp
