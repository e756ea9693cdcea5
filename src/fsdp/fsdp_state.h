// FSDPState: the per-module state of fully_shard and its hooks on the one hook
// point (nn::Module pre/post hooks), as PyTorch FSDP2's FSDPState. The first
// sharded module called becomes the root: it finds every state under it
// (lazy init), keeps the execution orders used for prefetching, and ends each
// backward with the callback that finishes the gradient reductions. How this
// fits with autograd: [Note: FSDP and autograd] in fsdp_state.cpp. The hooks
// decide from their group's states ([Note: FSDP state machines] in
// state_machine.h); a state without a group (a root left with no parameters)
// only queues the final callback.
#pragma once

#include <memory>
#include <vector>

#include "fsdp/fsdp_common.h"
#include "fsdp/fsdp_param_group.h"
#include "nn/module.h"

namespace tessel::fsdp {

class FSDPState;

// Shared by a root state and every state under it (after lazy init).
struct FSDPContext {
  std::vector<FSDPState*> states;              // root first, then module pre-order
  std::vector<FSDPState*> forward_order;       // pre-forward order, this iteration
  std::vector<FSDPState*> prev_forward_order;  // ... of the previous one: forward prefetch
  std::vector<FSDPState*> post_forward_order;  // reversed: backward order (backward prefetch)
  std::vector<FSDPState*> reduce_order;        // post-backward order of pending reductions
  bool final_callback_queued = false;
  int64_t prefetches = 0;  // all-gathers issued ahead of their group's use
  std::shared_ptr<MemoryTracker> memory = std::make_shared<MemoryTracker>();
  // Reused buffers of the groups under the root (not the root's own: it
  // gathers once per step and its buffers are the largest).
  std::shared_ptr<BufferPool> pool = std::make_shared<BufferPool>();
};

class FSDPState : public nn::AttachedState, public std::enable_shared_from_this<FSDPState> {
 public:
  // `group` may be null (a root left with no parameters of its own).
  FSDPState(nn::Module& module, std::unique_ptr<FSDPParamGroup> group, MixedPrecisionPolicy mp);
  ~FSDPState() override = default;
  FSDPState(const FSDPState&) = delete;
  FSDPState& operator=(const FSDPState&) = delete;

  // Attaches this state to its module (nn::Module::attach_state: the module
  // owns it) and adds the hooks (fully_shard calls it).
  void attach();

  nn::Module& module() const { return *module_; }
  FSDPParamGroup* param_group() const { return group_.get(); }
  bool is_root() const { return is_root_; }
  // Null before the root's first forward.
  const std::shared_ptr<FSDPContext>& context() const { return context_; }

  // Hook bodies (public for the autograd glue in fsdp_state.cpp).
  nn::Tensors pre_forward(nn::Tensors inputs);
  nn::Tensors post_forward(nn::Tensors outputs);
  void pre_backward();
  void post_backward();
  void final_callback();

 private:
  void lazy_init();
  void prefetch(const std::vector<FSDPState*>& order, int step);
  // Routes the inputs through RegisterPostBackward, so this group's
  // reduce-scatter runs once backward has passed them.
  nn::Tensors arm_post_backward(nn::Tensors inputs);
  nn::Tensors cast(nn::Tensors tensors, std::optional<at::ScalarType> dtype) const;

  nn::Module* module_;
  std::unique_ptr<FSDPParamGroup> group_;
  MixedPrecisionPolicy mp_;
  bool is_root_ = false;
  std::shared_ptr<FSDPContext> context_;
  std::vector<nn::HookHandle> hooks_;
};

// The state fully_shard attached to `module`, or null.
std::shared_ptr<FSDPState> find_state(const torch::nn::Module& module);

// States of module and every module under it, pre-order.
std::vector<std::shared_ptr<FSDPState>> states_in_subtree(torch::nn::Module& module);

// Makes every node-shared group among `states` unsharded with the shards as
// they are now: a barrier of each group's shard communicator (before it,
// another rank may still be updating its shards or reading the last values),
// then each rank writes its rows of the groups whose shards are not already
// there (FSDPParamGroup::publish_own_rows: a cast to param_dtype) and, if any
// did, a second barrier (after it, every rank's rows are in). Collective;
// no-op when no group is node-shared.
void publish_node_shared(const std::vector<FSDPState*>& states);

}  // namespace tessel::fsdp
