// [Note: FSDP state machines]
//
// Every parameter group (FSDPParamGroup) is in one TrainingState and one
// ShardedState (PyTorch FSDP2's names). The hooks (FSDPState, fsdp_state.cpp)
// decide from them, and every change goes through the group, which refuses a
// transition not listed here with tessel::Error naming the group's module path
// and both states.
//
// TrainingState: where the group is in a step, as far as the autograd graph
// its forward recorded is concerned. A forward without grad (evaluation, or
// the ordinary forward inside an activation-checkpointed module) records no
// graph and leaves it as it is.
//   Idle          no graph of this group awaits backward
//   Forward       a forward with grad ran (or is running); its backward is to come
//   PreBackward   backward reached the group's outputs: its parameters are
//                 gathered again; its post-backward is to come
//   PostBackward  its gradients went to the reduction; the backward is not over
//
//   Idle -> Forward           pre-forward with grad; or a recompute (inside
//                             backward) arms a group whose ordinary forward,
//                             inside the checkpointed module, ran without grad
//   Forward -> Forward        another forward with grad before any backward
//                             (the module called twice; a graph dropped)
//   Forward -> PreBackward    the first gradient hook on the group's outputs
//   Forward -> PostBackward   post-backward that no pre-backward preceded: a
//                             group armed in a recompute (no hooks on its
//                             outputs), or one the final callback finishes
//                             although backward never reached it
//   PreBackward -> PostBackward   post-backward: its inputs' gradients are
//                             complete (or the final callback)
//   PostBackward -> Idle, Idle -> Idle   the root's final callback, for every
//                             group under it
// What the hooks read: pre-backward runs from Forward only (from PreBackward
// or PostBackward it already ran in this backward; from Idle no forward
// armed it: illegal); post-backward runs from Forward or PreBackward (from
// Idle or PostBackward there is nothing to reduce: the final callback calls
// every group); a recompute arms a group only from Idle. Gradient
// accumulation without sync takes the same path every micro batch: only what
// the group's post-backward does with the gradients differs.
//
// ShardedState: what the group holds in memory.
//   Sharded -> Unsharded             the all-gather finished (or nothing to
//                                    gather: a one-rank fp32 group, a
//                                    node-shared group)
//   ShardedPostForward -> Unsharded  the slices kept after forward re-gathered
//   Unsharded -> ShardedPostForward  after forward, reshard_after_forward = k
//                                    with 1 < k < shard size: a 1/k slice kept
//   any -> Sharded                   reshard (Sharded -> Sharded: a no-op)
//   Unsharded -> Unsharded           a node-shared group's rows re-published
#pragma once

#include <string>

namespace tessel::fsdp {

// Where a parameter group is in the training step.
enum class TrainingState { Idle, Forward, PreBackward, PostBackward };
// What a parameter group holds in memory: only its shards, its shards plus a
// 1/k slice of the unsharded data (reshard_after_forward = k), or the
// unsharded parameters.
enum class ShardedState { Sharded, ShardedPostForward, Unsharded };

const char* to_string(TrainingState state);
const char* to_string(ShardedState state);

bool is_legal_transition(TrainingState from, TrainingState to);
bool is_legal_transition(ShardedState from, ShardedState to);

// Whether the group's post-backward is still to come in this step.
inline bool post_backward_pending(TrainingState state) {
  return state == TrainingState::Forward || state == TrainingState::PreBackward;
}

// Throws tessel::Error unless the transition is legal: "fully_shard(<group>):
// training state <from> -> <to> is not a legal transition: <why>".
void check_transition(const std::string& group, TrainingState from, TrainingState to);
void check_transition(const std::string& group, ShardedState from, ShardedState to);

}  // namespace tessel::fsdp
