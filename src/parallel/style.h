// A parallel style: how one module runs under tensor parallelism. apply()
// replaces the module's parameters by this rank's tp shards (sliced from the
// full weights the module holds, so every rank must start from the same
// weights), records each parameter's placement in the registry, and registers
// pre/post hooks on the module (nn/module.h) that move activations between
// layouts with the autograd collectives, so forward and backward are right.
//
// Gradient convention (the one of tensor/autograd_collectives.h): the gradient
// of a replicated activation is the full gradient on every rank, gradients of
// shards are this rank's shard. Every style keeps it, so styles compose in any
// plan.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "dist/communicator.h"
#include "nn/module.h"
#include "parallel/param_registry.h"
#include "parallel/plan.h"
#include "tensor/layout.h"

namespace tessel::parallel {

// What apply() needs besides the module.
struct ApplyContext {
  dist::CommunicatorPtr group;  // the tp group
  ParamRegistry* registry = nullptr;
  // Alias parameter name -> canonical name of tied tensors
  // ("lm_head.weight" -> "model.embed_tokens.weight").
  std::map<std::string, std::string> tied;

  // "<module path>.<param>" (or "<param>" for the root).
  static std::string param_name(const nn::Module& module, const std::string& param);
  // Replaces `param` of `module` by this rank's shard along `dim` (of each of
  // `packed_parts` blocks), keeping requires_grad, and records it.
  void shard_parameter(nn::Module& module, const std::string& param, int64_t dim, const std::string& style,
                       int packed_parts = 1) const;
  // Records `param` as replicated over tp.
  void replicate_parameter(nn::Module& module, const std::string& param, const std::string& style) const;
};

class Style {
 public:
  virtual ~Style() = default;
  // "ColwiseParallel(input=Replicate, output=Shard(-1))", for logs and `tessel plan`.
  virtual std::string describe() const = 0;
  virtual void apply(nn::Module& module, const ApplyContext& context) const = 0;
};

// Ways styles change parameters around a call, shared by several styles.
namespace detail {
// Makes every parameter of `module` itself (not its children) pass through
// copy_to_group while the module runs: forward unchanged, backward all-reduces
// the gradient over the group. For replicated parameters used on sharded data
// (sequence-parallel norms, per-head q/k norms), whose local gradients are
// partial sums. Swaps at call time, so it follows any parameter another layer
// (FSDP) installed before the call.
void all_reduce_parameter_grads(nn::Module& module, const dist::CommunicatorPtr& group);
// This rank's input 0 size along dim on every rank (from a tag when the tensor
// has one, else one small all-gather).
std::vector<int64_t> shard_sizes(const at::Tensor& x, int64_t dim, const dist::CommunicatorPtr& group);
[[noreturn]] void throw_wrong_module(nn::Module& module, const std::string& style, const char* what);
// Throws tessel::Error unless `module` is a `T`, naming the style and module.
template <typename T>
T& expect_module(nn::Module& module, const std::string& style, const char* what) {
  auto* m = dynamic_cast<T*>(&module);
  if (m == nullptr) throw_wrong_module(module, style, what);
  return *m;
}
}  // namespace detail

}  // namespace tessel::parallel
