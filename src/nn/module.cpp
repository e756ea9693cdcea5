#include "nn/module.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>

#include "core/edit_distance.h"
#include "core/error.h"
#include "nn/checkpoint.h"

namespace tessel::nn {

namespace {

std::uint64_t next_hook_id() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

std::string describe(const Module& m) {
  return m.path().empty() ? std::string("<root ") + m.name() + ">" : m.path();
}

}  // namespace

Tensors Module::call(Tensors inputs) {
  // Snapshots: a hook may add or remove hooks (e.g. a one-shot hook removing
  // itself) without invalidating this iteration.
  if (!pre_hooks_.empty()) {
    auto pre = pre_hooks_;
    for (auto& h : pre) inputs = (*h.fn)(*this, std::move(inputs));
  }
  Tensors outputs = checkpointing_ ? checkpointed_forward(*this, inputs) : forward(inputs);
  if (!post_hooks_.empty()) {
    auto post = post_hooks_;
    for (auto& h : post) outputs = (*h.fn)(*this, inputs, std::move(outputs));
  }
  return outputs;
}

at::Tensor Module::call(const at::Tensor& x) {
  Tensors out = call(Tensors{x});
  TESSEL_CHECK(out.size() == 1, "module {} returned {} outputs where the caller expects exactly one",
               describe(*this), out.size());
  return out[0];
}

HookHandle Module::add_pre_hook(PreHook hook) {
  TESSEL_CHECK(static_cast<bool>(hook), "empty pre-hook for module {}", describe(*this));
  HookHandle h{next_hook_id()};
  pre_hooks_.push_back({h.id, std::make_shared<PreHook>(std::move(hook))});
  return h;
}

HookHandle Module::add_post_hook(PostHook hook) {
  TESSEL_CHECK(static_cast<bool>(hook), "empty post-hook for module {}", describe(*this));
  HookHandle h{next_hook_id()};
  post_hooks_.push_back({h.id, std::make_shared<PostHook>(std::move(hook))});
  return h;
}

void Module::remove_hook(HookHandle handle) {
  auto pre = std::find_if(pre_hooks_.begin(), pre_hooks_.end(),
                          [&](const Pre& p) { return p.id == handle.id; });
  if (pre != pre_hooks_.end()) {
    pre_hooks_.erase(pre);
    return;
  }
  auto post = std::find_if(post_hooks_.begin(), post_hooks_.end(),
                           [&](const Post& p) { return p.id == handle.id; });
  TESSEL_CHECK(post != post_hooks_.end(),
               "hook {} is not registered on module {} (already removed, or added to another module)",
               handle.id, describe(*this));
  post_hooks_.erase(post);
}

void Module::attach_state(std::shared_ptr<AttachedState> state) {
  TESSEL_CHECK(attached_state_ == nullptr, "module {} already has a parallel layer's state attached", describe(*this));
  attached_state_ = std::move(state);
}

const at::Tensor& Module::parameter(const std::string& name) const {
  const at::Tensor* p = parameters_.find(name);
  if (p == nullptr) {
    std::string have;
    for (const auto& key : parameters_.keys()) have += (have.empty() ? "" : ", ") + key;
    throw Error(fmt::format("module {} has no parameter '{}' (it has: {})", describe(*this), name,
                            have.empty() ? "none" : have));
  }
  return *p;
}

bool Module::has_parameter(const std::string& name) const {
  return parameters_.find(name) != nullptr;
}

void Module::replace_parameter(const std::string& name, at::Tensor value) {
  TESSEL_CHECK(has_parameter(name), "cannot replace parameter '{}' of module {}: not registered",
               name, describe(*this));
  parameters_[name] = std::move(value);
}

void assign_module_paths(torch::nn::Module& root) {
  for (const auto& item : root.named_modules()) {
    if (auto* m = dynamic_cast<Module*>(item.value().get())) m->set_path(item.key());
  }
}

std::vector<std::pair<std::string, Module*>> named_tessel_modules(torch::nn::Module& root) {
  std::vector<std::pair<std::string, Module*>> result;
  for (const auto& item : root.named_modules()) {
    if (auto* m = dynamic_cast<Module*>(item.value().get())) result.emplace_back(item.key(), m);
  }
  return result;
}

Module* find_module(torch::nn::Module& root, const std::string& path) {
  std::vector<std::pair<std::size_t, std::string>> candidates;
  for (const auto& item : root.named_modules()) {
    if (item.key() == path) {
      auto* m = dynamic_cast<Module*>(item.value().get());
      TESSEL_CHECK(m != nullptr, "module '{}' is a plain torch module ({}), not a tessel::nn::Module",
                   path, item.value()->name());
      return m;
    }
    candidates.emplace_back(edit_distance(item.key(), path), item.key());
  }
  std::sort(candidates.begin(), candidates.end());
  std::string nearest;
  for (std::size_t i = 0; i < std::min<std::size_t>(5, candidates.size()); ++i) {
    nearest += fmt::format("{}'{}'", i ? ", " : "", candidates[i].second);
  }
  throw Error(fmt::format("no module at path '{}' (nearest paths: {})", path,
                          nearest.empty() ? "none" : nearest));
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  TESSEL_CHECK(module != nullptr, "ModuleList::push_back of a null module");
  register_module(std::to_string(items_.size()), module);
  items_.push_back(std::move(module));
}

void ModuleList::push_back(std::shared_ptr<Module> module, const std::string& name) {
  TESSEL_CHECK(module != nullptr, "ModuleList::push_back of a null module");
  register_module(name, module);
  items_.push_back(std::move(module));
}

Tensors ModuleList::forward(const Tensors&) {
  throw Error(fmt::format("ModuleList {} is a container: call its items, not the list",
                          describe(*this)));
}

}  // namespace tessel::nn
