// [Note: FSDP and autograd]
//
// fully_shard replaces every parameter of a group by two leaf tensors (see
// fsdp_param.h): the fp32 *sharded* param, registered in the module between
// steps so the optimizer finds it, and the *unsharded* param, registered
// (nn::Module::replace_parameter) from the group's pre-forward until its
// post-backward, so forward reads it and autograd accumulates the full
// gradient into its .grad. The unsharded params alias one flat buffer per
// group; "resharding" frees that buffer's storage in place (free_storage) and
// "unsharding" re-allocates and refills it. The tensors autograd saved in
// forward point at the same storage, so they are valid again once backward
// has re-gathered. The unsharded params are separate TensorImpls over the
// buffer (not views), so refilling the buffer does not bump the version
// counter autograd checks on saved tensors.
//
// Each hook decides from its group's training and sharded states and moves
// them on ([Note: FSDP state machines] in state_machine.h).
// Forward (hooks on the one hook point, nn::Module::call):
//   pre-forward   issue this group's all-gather (unless prefetched), wait for
//                 it, issue the next group's (order recorded in the
//                 previous iteration) so it overlaps this group's compute,
//                 unless that group's updated parts are still crossing
//                 between replicas (shard_optimizer_over_replicas): then it
//                 gathers at its own pre-forward; install the unsharded params;
//                 wrap the floating inputs in RegisterPostBackward (below).
//   post-forward  reshard per reshard_after_forward (the root keeps its
//                 params), register a gradient hook on every output.
// Backward:
//   output-gradient hook (first one per backward) = pre-backward: re-gather
//                 if resharded (usually prefetched), then prefetch the group
//                 whose backward comes next (reverse post-forward order). The first pre-backward of
//                 a backward queues the root's final callback on the engine.
//   RegisterPostBackward's backward runs once the gradients of the module's
//                 inputs are complete, i.e. after every op of the module ran
//                 backward; the AccumulateGrad nodes of its parameters have
//                 the highest priority in the engine, so the unsharded .grad
//                 are complete too = post-backward: finish the reduce-scatters
//                 issued earlier (frees their packed inputs, issues their HSDP
//                 all-reduces), reshard, pack the grads, issue the
//                 reduce-scatter. At most one packed input besides this
//                 group's is alive at any time.
//   final callback (Engine::queue_callback, after the whole graph): runs the
//                 post-backward of groups no input hook reached (the root:
//                 its inputs are token ids), waits for the remaining
//                 reduce-scatters and the HSDP all-reduces, divides, hands the
//                 results to the sharded params' fp32 .grad, reshards
//                 everything, swaps the sharded params back into the modules.
// Node-shared parameters (FSDPOptions::node_shared_params): a group's
// unsharded buffer is memory every rank of its shard group maps. In fp32 each
// rank's sharded params are its own rows of it, so the optimizer step writes
// the node's copy in place. Two barriers of the shard group order those
// writes against the other ranks' reads: one at the end of backward (final
// callback), after which no rank reads the values any more (its backward,
// activation recompute included, is over) and each may update its rows; one
// at the root's pre-forward (publish_node_shared), after which every rank's
// update is in. With another param_dtype the rows are a cast copy of the
// shards: the root's pre-forward brackets each rank's copy into its rows by
// two barriers (the first as above, so no rank still reads the last values).
// Such groups are then unsharded for the whole pass: unshard() and reshard()
// only move the state, the buffer is never freed, backward gathers nothing.
// Every rank runs the same modules in the same order, so collectives are
// issued in the same order everywhere.
#include "fsdp/fsdp_state.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>

#include <algorithm>

#include "core/error.h"

namespace tessel::fsdp {

namespace {

struct StateHolder : torch::CustomClassHolder {
  std::weak_ptr<FSDPState> state;
};

// Identity on the module's inputs whose backward is the group's post-backward.
struct RegisterPostBackward : public torch::autograd::Function<RegisterPostBackward> {
  // `inputs` must be a TensorList: a variable_list argument would bind to the
  // catch-all overload of autograd's ExtractVariables and count as a single
  // non-tensor input (no gradient edges).
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                c10::intrusive_ptr<StateHolder> holder,
                                                at::TensorList inputs) {
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(holder));
    return inputs.vec();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto holder =
        c10::static_intrusive_pointer_cast<StateHolder>(ctx->saved_data["state"].toCapsule());
    if (auto state = holder->state.lock()) state->post_backward();
    torch::autograd::variable_list result{at::Tensor()};
    result.insert(result.end(), grads.begin(), grads.end());
    return result;
  }
};

void visit_modules(torch::nn::Module& m, const std::function<void(torch::nn::Module&)>& fn) {
  fn(m);
  for (const auto& child : m.children()) visit_modules(*child, fn);
}

}  // namespace

std::shared_ptr<FSDPState> find_state(const torch::nn::Module& module) {
  const auto* m = dynamic_cast<const nn::Module*>(&module);
  return m == nullptr ? nullptr : std::dynamic_pointer_cast<FSDPState>(m->attached_state());
}

std::vector<std::shared_ptr<FSDPState>> states_in_subtree(torch::nn::Module& module) {
  std::vector<std::shared_ptr<FSDPState>> result;
  visit_modules(module, [&](torch::nn::Module& m) {
    if (auto s = find_state(m)) result.push_back(std::move(s));
  });
  return result;
}

namespace {

// The node-shared groups among `states` that `select` picks, in the states'
// order (the same on every rank).
template <typename Select>
std::vector<FSDPParamGroup*> node_shared_groups(const std::vector<FSDPState*>& states, Select select) {
  std::vector<FSDPParamGroup*> groups;
  for (FSDPState* s : states) {
    FSDPParamGroup* g = s->param_group();
    if (g != nullptr && g->node_shared() && select(*g)) groups.push_back(g);
  }
  return groups;
}

// A barrier of each distinct shard communicator of `groups`, in their order.
void barrier_shard_groups(const std::vector<FSDPParamGroup*>& groups) {
  std::vector<dist::Communicator*> comms;
  for (FSDPParamGroup* g : groups) {
    dist::Communicator* c = g->mesh().shard().get();
    if (std::find(comms.begin(), comms.end(), c) == comms.end()) comms.push_back(c);
  }
  for (dist::Communicator* c : comms) c->barrier();
}

}  // namespace

void publish_node_shared(const std::vector<FSDPState*>& states) {
  const auto groups = node_shared_groups(states, [](const FSDPParamGroup&) { return true; });
  if (groups.empty()) return;
  barrier_shard_groups(groups);
  for (FSDPParamGroup* g : groups) g->publish_own_rows();
  barrier_shard_groups(
      node_shared_groups(states, [](const FSDPParamGroup& g) { return !g.shards_in_node_copy(); }));
}

FSDPState::FSDPState(nn::Module& module, std::unique_ptr<FSDPParamGroup> group,
                     MixedPrecisionPolicy mp)
    : module_(&module), group_(std::move(group)), mp_(mp) {}

void FSDPState::attach() {
  // The module owns the state and the hooks: the hooks may point at the state
  // without owning it, and the state lives as long as the module.
  module_->attach_state(shared_from_this());
  FSDPState* self = this;
  hooks_.push_back(module_->add_pre_hook(
      [self](nn::Module&, nn::Tensors inputs) { return self->pre_forward(std::move(inputs)); }));
  hooks_.push_back(
      module_->add_post_hook([self](nn::Module&, const nn::Tensors&, nn::Tensors outputs) {
        return self->post_forward(std::move(outputs));
      }));
}

nn::Tensors FSDPState::cast(nn::Tensors tensors, std::optional<at::ScalarType> dtype) const {
  if (!dtype) return tensors;
  for (auto& t : tensors) {
    if (t.defined() && at::isFloatingType(t.scalar_type()) && t.scalar_type() != *dtype) {
      t = t.to(*dtype);
    }
  }
  return tensors;
}

void FSDPState::lazy_init() {
  // The first sharded module to run forward is the root (the outermost one).
  is_root_ = true;
  context_ = std::make_shared<FSDPContext>();
  for (auto& s : states_in_subtree(*module_)) {
    s->context_ = context_;
    if (s.get() != this) s->is_root_ = false;
    context_->states.push_back(s.get());
    if (s->group_) s->group_->set_memory_tracker(context_->memory);
    if (s->group_ && s.get() != this) s->group_->set_buffer_pool(context_->pool);
  }
  if (group_) group_->set_keep_unsharded_after_forward();
}

void FSDPState::prefetch(const std::vector<FSDPState*>& order, int step) {
  auto it = std::find(order.begin(), order.end(), this);
  if (it == order.end()) return;
  const auto index = (it - order.begin()) + step;
  if (index < 0 || index >= static_cast<std::ptrdiff_t>(order.size())) return;
  FSDPParamGroup* next = order[static_cast<size_t>(index)]->group_.get();
  if (next == nullptr || next->sharded_state() == ShardedState::Unsharded ||
      next->unshard_in_flight()) {
    return;
  }
  // Split over replicas, the next group's gather reads its shards, which are
  // complete only once the cross-replica all-gather of its updated parts has
  // arrived. Waiting for that here would hold this group's compute behind the
  // link; instead the next group gathers at its own pre-forward. The shard
  // group's gathers are issued in the same order either way (each group's
  // before the next one's), so ranks that decide differently still match.
  if (!next->replica_parts_arrived()) return;
  next->unshard();
  ++context_->prefetches;
}

nn::Tensors FSDPState::pre_forward(nn::Tensors inputs) {
  if (nn::in_recompute()) {
    // Activation-checkpoint recompute inside backward: pre-backward already
    // re-gathered; make sure and leave the rest to the ordinary forward's hooks.
    if (group_) {
      group_->unshard();
      group_->wait_for_unshard();
      group_->use_unsharded_params();
    }
    inputs = cast(std::move(inputs), mp_.param_dtype);
    // A group nested inside the checkpointed module (an expert under expert
    // parallelism) ran its ordinary forward without grad, so it is Idle and
    // nothing armed its reduce-scatter: arm it on the recomputed graph, where
    // its gradients are made (Idle -> Forward).
    if (group_ && at::GradMode::is_enabled() && !post_backward_pending(group_->training_state())) {
      group_->set_training_state(TrainingState::Forward);
      inputs = arm_post_backward(std::move(inputs));
    }
    return inputs;
  }
  if (!context_) lazy_init();
  if (is_root_) {
    if (!context_->forward_order.empty()) context_->prev_forward_order = context_->forward_order;
    context_->forward_order.clear();
    context_->post_forward_order.clear();
    // Node-shared groups take the shards as they are now (the optimizer, a
    // loaded checkpoint may have changed them) for this whole pass.
    publish_node_shared(context_->states);
  }
  context_->forward_order.push_back(this);
  const bool grad = at::GradMode::is_enabled();
  if (group_) {
    // A forward without grad records no graph: the training state stays.
    if (grad) group_->set_training_state(TrainingState::Forward);
    // Wait for our own gather (usually prefetched) before issuing the next
    // one, so at most one gather buffer is alive besides the unsharded groups.
    group_->unshard();
    group_->wait_for_unshard();
    prefetch(context_->prev_forward_order, +1);
    group_->use_unsharded_params();
  }
  inputs = cast(std::move(inputs), mp_.param_dtype);
  if (grad && group_) inputs = arm_post_backward(std::move(inputs));
  return inputs;
}

nn::Tensors FSDPState::arm_post_backward(nn::Tensors inputs) {
  // Route every floating input that requires grad through RegisterPostBackward.
  torch::autograd::variable_list wrapped;
  std::vector<size_t> where;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      wrapped.push_back(inputs[i]);
      where.push_back(i);
    }
  }
  if (!wrapped.empty()) {
    auto holder = c10::make_intrusive<StateHolder>();
    holder->state = weak_from_this();
    auto outs = RegisterPostBackward::apply(holder, at::TensorList(wrapped));
    for (size_t j = 0; j < where.size(); ++j) inputs[where[j]] = outs[j];
  }
  return inputs;
}

nn::Tensors FSDPState::post_forward(nn::Tensors outputs) {
  if (nn::in_recompute()) return outputs;
  const bool grad = at::GradMode::is_enabled();
  if (group_) {
    group_->post_forward_reshard();
    if (!grad) group_->use_sharded_params();  // no backward will come
  }
  context_->post_forward_order.push_back(this);
  outputs = cast(std::move(outputs), mp_.output_dtype);
  if (grad) {
    std::weak_ptr<FSDPState> weak = weak_from_this();
    for (auto& out : outputs) {
      if (!out.defined() || !out.requires_grad()) continue;
      out.register_hook([weak](const at::Tensor&) {
        if (auto s = weak.lock()) s->pre_backward();
      });
    }
  }
  return outputs;
}

void FSDPState::pre_backward() {
  if (group_) {
    // Once per backward: the first gradient hook of the outputs finds the
    // group in Forward; later ones find it in PreBackward or PostBackward.
    const TrainingState state = group_->training_state();
    if (state == TrainingState::PreBackward || state == TrainingState::PostBackward) return;
    group_->set_training_state(TrainingState::PreBackward);  // from Idle: throws
  }
  if (!context_->final_callback_queued) {
    context_->final_callback_queued = true;
    FSDPState* root = context_->states.front();
    std::weak_ptr<FSDPState> weak = root->weak_from_this();
    torch::autograd::Engine::get_default_engine().queue_callback([weak] {
      if (auto s = weak.lock()) s->final_callback();
    });
  }
  if (!group_) return;
  group_->unshard();
  group_->wait_for_unshard();
  prefetch(context_->post_forward_order, -1);
  group_->use_unsharded_params();
}

void FSDPState::post_backward() {
  // Called for every group by the final callback: only those whose
  // post-backward is still to come reduce (-> PostBackward).
  if (!group_ || !post_backward_pending(group_->training_state())) return;
  // Reduce as you go: the reduce-scatters of groups whose backward ended
  // earlier have had (at least) this group's backward to run. Finish them now,
  // in issue order, so their packed inputs are freed and their HSDP
  // all-reduces issued while backward goes on, before this group packs its own.
  for (FSDPState* s : context_->reduce_order) s->group_->finish_reduce_scatter();
  group_->post_backward();
  group_->use_sharded_params();
  if (group_->has_pending_reduce()) context_->reduce_order.push_back(this);
}

void FSDPState::final_callback() {
  auto ctx = context_;
  // Groups whose inputs carried no gradient (the root: token ids), in reverse
  // module order so every rank issues their reduce-scatters in the same order.
  for (auto it = ctx->states.rbegin(); it != ctx->states.rend(); ++it) (*it)->post_backward();
  for (FSDPState* s : ctx->reduce_order) s->group_->finish_reduce_scatter();
  for (FSDPState* s : ctx->reduce_order) s->group_->finish_all_reduce();
  ctx->reduce_order.clear();
  for (FSDPState* s : ctx->states) {
    if (s->group_) {
      s->group_->reshard();
      s->group_->use_sharded_params();
      s->group_->set_training_state(TrainingState::Idle);
    }
  }
  ctx->final_callback_queued = false;
  // The optimizer step that may follow writes this rank's rows of the
  // node-shared fp32 groups in place: wait until no rank reads them any more.
  barrier_shard_groups(
      node_shared_groups(ctx->states, [](const FSDPParamGroup& g) { return g.shards_in_node_copy(); }));
}

}  // namespace tessel::fsdp
