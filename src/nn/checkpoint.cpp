#include "nn/checkpoint.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "core/error.h"

namespace tessel::nn {

namespace {

thread_local int recompute_depth = 0;

struct RecomputeScope {
  RecomputeScope() { ++recompute_depth; }
  ~RecomputeScope() { --recompute_depth; }
  RecomputeScope(const RecomputeScope&) = delete;
  RecomputeScope& operator=(const RecomputeScope&) = delete;
};

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Inputs: the module's inputs, then (only when none of them requires grad) an
// empty "anchor" tensor that does, so the outputs still get a grad_fn and the
// parameters still receive gradients through the recompute.
struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  static variable_list forward(AutogradContext* ctx, at::TensorList args, Module* module,
                               int64_t num_inputs) {
    ctx->saved_data["module"] = static_cast<int64_t>(reinterpret_cast<std::intptr_t>(module));
    ctx->saved_data["num_args"] = static_cast<int64_t>(args.size());
    std::vector<int64_t> needs_grad;
    Tensors inputs(args.begin(), args.begin() + num_inputs);
    for (const auto& t : inputs) needs_grad.push_back(t.defined() && t.requires_grad() ? 1 : 0);
    ctx->saved_data["needs_grad"] = needs_grad;
    ctx->save_for_backward(inputs);

    Tensors outputs = detail::ModuleAccess::forward(*module, inputs);
    Tensors non_differentiable;
    for (const auto& o : outputs) {
      TESSEL_CHECK(o.defined(), "checkpointed module {} returned an undefined tensor", module->path());
      if (!at::isFloatingType(o.scalar_type()) && !at::isComplexType(o.scalar_type())) {
        non_differentiable.push_back(o);
      }
    }
    if (!non_differentiable.empty()) ctx->mark_non_differentiable(non_differentiable);
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto* module = reinterpret_cast<Module*>(
        static_cast<std::intptr_t>(ctx->saved_data["module"].toInt()));
    const auto needs_grad = ctx->saved_data["needs_grad"].toIntVector();
    const auto num_args = ctx->saved_data["num_args"].toInt();
    Tensors saved = ctx->get_saved_variables();

    Tensors inputs;
    inputs.reserve(saved.size());
    for (std::size_t i = 0; i < saved.size(); ++i) {
      if (!saved[i].defined()) {
        inputs.push_back(saved[i]);
        continue;
      }
      at::Tensor x = saved[i].detach();
      if (needs_grad[i]) x.requires_grad_(true);
      inputs.push_back(x);
    }

    Tensors outputs;
    {
      RecomputeScope scope;
      at::AutoGradMode grad_mode(true);
      outputs = detail::ModuleAccess::forward(*module, inputs);
    }
    TESSEL_CHECK(outputs.size() == grad_outputs.size(),
                 "checkpointed module {} returned {} outputs on recompute but {} in forward",
                 module->path(), outputs.size(), grad_outputs.size());
    variable_list roots, grads;
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].requires_grad() && grad_outputs[i].defined()) {
        roots.push_back(outputs[i]);
        grads.push_back(grad_outputs[i]);
      }
    }
    if (!roots.empty()) torch::autograd::backward(roots, grads);

    variable_list result;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      result.push_back(needs_grad[i] && inputs[i].defined() ? inputs[i].grad() : at::Tensor());
    }
    result.resize(static_cast<std::size_t>(num_args));  // the anchor gets no gradient
    result.emplace_back();                               // module pointer
    result.emplace_back();                               // num_inputs
    return result;
  }
};

}  // namespace

bool in_recompute() { return recompute_depth > 0; }

Tensors checkpointed_forward(Module& module, const Tensors& inputs) {
  if (!at::GradMode::is_enabled()) return detail::ModuleAccess::forward(module, inputs);
  bool any_requires_grad = std::any_of(inputs.begin(), inputs.end(), [](const at::Tensor& t) {
    return t.defined() && t.requires_grad();
  });
  Tensors args = inputs;
  if (!any_requires_grad) {
    args.push_back(at::empty({0}, at::TensorOptions().dtype(at::kFloat)).requires_grad_(true));
  }
  return CheckpointFunction::apply(at::TensorList(args), &module,
                                   static_cast<int64_t>(inputs.size()));
}

}  // namespace tessel::nn
