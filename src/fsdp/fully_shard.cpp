#include "fsdp/fully_shard.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/variable.h>

#include <optional>
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "fsdp/fsdp_param_group.h"
#include "fsdp/fsdp_state.h"

namespace tessel::fsdp {

namespace {

std::string join_path(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "." + b;
}

std::string describe(const nn::Module& m) {
  return m.path().empty() ? std::string("<root ") + m.name() + ">" : m.path();
}

// A tensor fully_shard took keeps a mark in its autograd name (the debugging
// name libtorch keeps on every tensor; nothing else in tessel sets it), so a
// module that still holds it after its group replaced it everywhere it could
// see (tied to a module outside the group, whichever group that falls to)
// is refused, naming the group that took it. The mark lives and dies with
// the tensor: no table of groups is kept.
constexpr std::string_view kTakenMark = "tessel.fsdp.taken: ";

void mark_taken(const at::Tensor& original, const std::string& owner) {
  torch::autograd::impl::set_name(original, std::string(kTakenMark) + owner);
}

std::optional<std::string> taken_by(const at::Tensor& t) {
  const std::string& name = t.name();
  if (name.rfind(kTakenMark, 0) != 0) return std::nullopt;
  return name.substr(kTakenMark.size());
}

}  // namespace

FSDPModule fully_shard(nn::Module& module, const FSDPMesh& mesh, FSDPOptions options) {
  TESSEL_CHECK(mesh.shard() != nullptr, "fully_shard({}): the mesh has no shard group",
               describe(module));
  if (find_state(module)) {
    throw Error(fmt::format("fully_shard was already applied to module {}", describe(module)));
  }
  const int world = mesh.shard_size();
  const int rank = mesh.shard()->rank();

  std::vector<std::unique_ptr<FSDPParam>> params;
  std::vector<at::Tensor> originals;
  std::unordered_map<const c10::TensorImpl*, FSDPParam*> seen;
  std::function<void(torch::nn::Module&, const std::string&)> walk = [&](torch::nn::Module& m,
                                                                         const std::string& rel) {
    if (&m != &module && find_state(m)) return;  // a sharded submodule keeps its own
    auto* tm = dynamic_cast<nn::Module*>(&m);
    for (const auto& item : m.named_parameters(/*recurse=*/false)) {
      const at::Tensor& t = item.value();
      if (!t.defined()) continue;
      const std::string fqn = join_path(module.path(), join_path(rel, item.key()));
      if (const auto owner = taken_by(t)) {
        throw Error(fmt::format(
            "fully_shard({}): parameter '{}' is the same tensor as {}. Tied parameters must live in one parameter "
            "group: apply fully_shard bottom-up and do not shard a module that holds only one of the tied "
            "parameters, so both fall to a common ancestor's group (the root keeps a tied embedding and lm_head "
            "together)",
            describe(module), fqn, *owner));
      }
      if (is_shard_storage(t)) {
        throw Error(fmt::format(
            "fully_shard({}): parameter '{}' is already a shard of another FSDP group, whose module is not below "
            "this one: fully_shard was applied to a module above it first. Apply fully_shard bottom-up (the "
            "decoder layers first, the root last)",
            describe(module), fqn));
      }
      TESSEL_CHECK(tm != nullptr,
                   "fully_shard({}): module '{}' is a plain torch::nn::Module ({}); FSDP swaps "
                   "parameters through tessel::nn::Module::replace_parameter",
                   describe(module), join_path(module.path(), rel), m.name());
      auto it = seen.find(t.unsafeGetTensorImpl());
      if (it != seen.end()) {
        it->second->registrations().push_back({tm, item.key()});  // tied within the group
        continue;
      }
      auto p = std::make_unique<FSDPParam>(fqn, t, world, rank);
      p->registrations().push_back({tm, item.key()});
      seen.emplace(t.unsafeGetTensorImpl(), p.get());
      params.push_back(std::move(p));
      originals.push_back(t);
    }
    for (const auto& child : m.named_children()) {
      walk(*child.value(), rel.empty() ? child.key() : rel + "." + child.key());
    }
  };
  walk(module, "");

  std::unique_ptr<FSDPParamGroup> group;
  if (!params.empty()) {
    group = std::make_unique<FSDPParamGroup>(describe(module), std::move(params), originals, mesh,
                                             options);
    group->use_sharded_params();
  }
  // Marked only now that the group exists: a failed fully_shard leaves them as they were.
  if (group) {
    for (size_t i = 0; i < originals.size(); ++i) {  // the group keeps the params in the order they were found
      mark_taken(originals[i], fmt::format("'{}', which fully_shard({}) already took", group->params()[i]->fqn(),
                                           group->name()));
    }
  }
  originals.clear();
  auto state = std::make_shared<FSDPState>(module, std::move(group), options.mp_policy);
  state->attach();
  return FSDPModule(state);
}

std::optional<FSDPModule> fsdp_module(nn::Module& module) {
  auto state = find_state(module);
  if (!state) return std::nullopt;
  return FSDPModule(state);
}

FSDPModule::FSDPModule(std::shared_ptr<FSDPState> state) : state_(std::move(state)) {}

nn::Module& FSDPModule::module() const { return state_->module(); }

FSDPParamGroup* FSDPModule::param_group() const { return state_->param_group(); }

void FSDPModule::set_requires_gradient_sync(bool enabled, bool recurse) {
  auto states = recurse ? states_in_subtree(state_->module()) : std::vector{state_};
  for (auto& s : states) {
    if (s->param_group()) s->param_group()->requires_gradient_sync = enabled;
  }
}

void FSDPModule::set_requires_all_reduce(bool enabled, bool recurse) {
  auto states = recurse ? states_in_subtree(state_->module()) : std::vector{state_};
  for (auto& s : states) {
    if (s->param_group()) s->param_group()->requires_all_reduce = enabled;
  }
}

void FSDPModule::unshard() {
  if (auto* g = state_->param_group()) {
    if (g->node_shared()) {
      publish_node_shared({state_.get()});
      return;
    }
    g->unshard();
    g->wait_for_unshard();
  }
}

void FSDPModule::reshard() {
  if (auto* g = state_->param_group()) g->reshard();
}

int64_t FSDPModule::prefetched_all_gathers() const {
  return state_->context() ? state_->context()->prefetches : 0;
}

std::vector<FSDPParamGroup*> FSDPModule::replica_split_groups() const {
  std::vector<FSDPParamGroup*> groups;
  for (auto& s : states_in_subtree(state_->module())) {
    if (s->param_group() && s->param_group()->splits_over_replicas()) groups.push_back(s->param_group());
  }
  return groups;
}

void FSDPModule::wait_for_replica_parts() const {
  for (FSDPParamGroup* g : replica_split_groups()) g->wait_for_replica_parts();
}

FSDPMemoryStats FSDPModule::memory_stats() const {
  FSDPMemoryStats stats;
  std::vector<const MemoryTracker*> trackers;
  for (auto& s : states_in_subtree(state_->module())) {
    const FSDPParamGroup* g = s->param_group();
    if (g == nullptr) continue;
    stats.sharded_param_bytes += g->sharded_param_bytes();
    stats.sharded_grad_bytes += g->sharded_grad_bytes();
    const MemoryTracker* t = g->memory().get();
    if (std::find(trackers.begin(), trackers.end(), t) == trackers.end()) trackers.push_back(t);
  }
  for (const MemoryTracker* t : trackers) {
    stats.unsharded_param_bytes += t->current(Buffer::UnshardedParams);
    stats.gradient_buffer_bytes += t->current(Buffer::Gradients);
    stats.peak_unsharded_param_bytes += t->peak_params();
    stats.peak_transient_bytes += t->peak();
  }
  return stats;
}

void FSDPModule::reset_peak_memory() {
  for (auto& s : states_in_subtree(state_->module())) {
    if (s->param_group()) s->param_group()->memory()->reset_peak();
  }
}

}  // namespace tessel::fsdp
