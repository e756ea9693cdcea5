// The one hook point (ARCHITECTURE.md). libtorch modules have no forward
// hooks, so every tessel module derives from tessel::nn::Module and model code
// calls its children only through call(), which runs the module's pre-hooks
// (each may replace the inputs), forward(), then its post-hooks (each may
// replace the outputs), the way nn.Module.__call__ does in PyTorch. FSDP and
// tensor-parallel styles attach hooks by module path ("model.layers.3.mlp")
// without the model code knowing about them.
//
// Parameters are read through parameter(name) at call time, never cached in
// members, so a parallel layer can swap a parameter for its shard or its
// unsharded copy with replace_parameter() and the model code runs unchanged.
//
// Activation checkpointing (set_activation_checkpointing): the module's own
// hooks run once, outside the checkpointed region, in the ordinary forward.
// forward() itself runs without recording a graph; in backward it runs again
// (with grad enabled) before gradients flow through it. During that re-run
// in_recompute() is true, and the hooks of every module *inside* the
// checkpointed one run again through call(), so tensor-parallel hooks, which
// are part of the computation, are replayed. FSDP hooks can check
// in_recompute() to tell a recompute from a fresh forward. A hook that needs
// the checkpointed module's parameters materialised for the recompute must
// arrange it before backward reaches the module (e.g. from a gradient hook on
// the module's outputs, registered by its post-hook): those hooks fire before
// the recompute. Gradients of parameters used in the recompute accumulate into
// their .grad as in an ordinary backward.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessel::nn {

namespace detail {
struct ModuleAccess;  // lets the checkpoint function run forward() directly
}  // namespace detail

using Tensors = std::vector<at::Tensor>;

class Module;

// A pre-hook receives the inputs and returns the inputs forward() will see.
using PreHook = std::function<Tensors(Module& module, Tensors inputs)>;
// A post-hook receives the inputs forward() saw and its outputs, and returns
// the outputs the caller will see.
using PostHook = std::function<Tensors(Module& module, const Tensors& inputs, Tensors outputs)>;

// State a parallel layer keeps for one module (FSDP's parameter group, its
// place in the prefetch order): owned by the module and found from it, so no
// process-wide table maps modules to their state, and it dies with the module.
class AttachedState {
 public:
  virtual ~AttachedState() = default;
};

// Identifies one registered hook for remove_hook(); ids are unique per process.
struct HookHandle {
  std::uint64_t id = 0;
};

class Module : public torch::nn::Module {
 public:
  Module() = default;
  explicit Module(const std::string& type_name) : torch::nn::Module(type_name) {}

  // Runs pre-hooks (in registration order), forward (checkpointed if enabled),
  // then post-hooks (in registration order). Hooks added or removed by a hook
  // take effect from the next call.
  Tensors call(Tensors inputs);
  // One input, one output. Throws if forward/hooks produce other than one.
  at::Tensor call(const at::Tensor& x);

  HookHandle add_pre_hook(PreHook hook);
  HookHandle add_post_hook(PostHook hook);
  // Removing an unknown (or already removed) handle is an error: it usually
  // means the hook was attached to a different module than the caller thinks.
  void remove_hook(HookHandle handle);
  std::size_t num_hooks() const { return pre_hooks_.size() + post_hooks_.size(); }

  // The parallel layer's state for this module (at most one; null if none).
  // Attaching a second is an error: two layers would each think they own the
  // module's parameters.
  void attach_state(std::shared_ptr<AttachedState> state);
  const std::shared_ptr<AttachedState>& attached_state() const { return attached_state_; }

  // Full dotted path from the root ("model.layers.3.self_attn.q_proj"); empty
  // for the root and for modules not yet seen by assign_module_paths().
  const std::string& path() const { return path_; }
  void set_path(std::string path) { path_ = std::move(path); }

  // The current value of a registered parameter (throws naming the module
  // path and the parameters it has when absent).
  const at::Tensor& parameter(const std::string& name) const;
  bool has_parameter(const std::string& name) const;
  // Replaces the tensor registered under `name` (same name, so named_parameters
  // and checkpoints are unaffected). Used by TP/FSDP to install shards or
  // unsharded copies.
  void replace_parameter(const std::string& name, at::Tensor value);

  // When on, call() runs forward() under activation checkpointing (see the
  // paragraph at the top of this header) whenever grad mode is enabled.
  void set_activation_checkpointing(bool on) { checkpointing_ = on; }
  bool activation_checkpointing() const { return checkpointing_; }

 protected:
  // The computation; model code never calls it directly (use call()).
  virtual Tensors forward(const Tensors& inputs) = 0;

 private:
  friend struct detail::ModuleAccess;
  struct Pre {
    std::uint64_t id;
    std::shared_ptr<PreHook> fn;
  };
  struct Post {
    std::uint64_t id;
    std::shared_ptr<PostHook> fn;
  };
  std::vector<Pre> pre_hooks_;
  std::vector<Post> post_hooks_;
  std::shared_ptr<AttachedState> attached_state_;
  std::string path_;
  bool checkpointing_ = false;
};

// True while a checkpointed module re-runs its forward during backward (on the
// thread doing the recompute).
bool in_recompute();

// Sets path() of every tessel Module under root (root's own path is ""). The
// root must be owned by a std::shared_ptr (libtorch's named_modules needs it).
void assign_module_paths(torch::nn::Module& root);

// The tessel Module at `path` under root ("" is the root itself). Throws
// tessel::Error naming the closest existing paths when absent.
Module* find_module(torch::nn::Module& root, const std::string& path);

// Every tessel Module under root (including root) with its path, in
// registration (depth-first) order: what parallel plans match patterns against.
std::vector<std::pair<std::string, Module*>> named_tessel_modules(torch::nn::Module& root);

// A container that only names its children "0", "1", ... (HF's ModuleList), so
// parameters read "model.layers.3.mlp.up_proj.weight".
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  void push_back(std::shared_ptr<Module> module);
  // Registered under `name` instead of its position (a list holding some of
  // another list's items under their original names: expert parallelism).
  void push_back(std::shared_ptr<Module> module, const std::string& name);
  std::size_t size() const { return items_.size(); }
  const std::shared_ptr<Module>& operator[](std::size_t i) const { return items_.at(i); }
  const std::vector<std::shared_ptr<Module>>& items() const { return items_; }

 protected:
  Tensors forward(const Tensors& inputs) override;  // throws: not callable

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

}  // namespace tessel::nn
