// Styles whose parameters stay whole on every tp rank:
//
// ReplicateParallel  parameters replicated. With grad_all_reduce (HF's
//                    replicated_with_grad_allreduce) their gradients are
//                    summed over tp in backward: right for modules that see a
//                    different part of the data on each rank (Qwen3/Gemma3
//                    per-head q_norm/k_norm on the local heads). Without it
//                    (HF's `replicate`), none: a module fed replicated
//                    activations already holds the full gradient on every
//                    rank, and summing would multiply it by tp.
// GatherParallel     HF's `gather`: the module's output is a partial sum
//                    (its children are local_colwise / local_rowwise) and is
//                    all-reduced; backward identity.
// IsolatedParallel   HF's `local`: parameters local and whole, no
//                    communication.
#pragma once

#include <string>

#include "parallel/style.h"

namespace tessel::parallel {

class ReplicateParallel : public Style {
 public:
  explicit ReplicateParallel(bool grad_all_reduce, std::string label = "ReplicateParallel");
  std::string describe() const override;
  void apply(nn::Module& module, const ApplyContext& context) const override;

 private:
  bool grad_all_reduce_;
  std::string label_;
};

class GatherParallel : public Style {
 public:
  std::string describe() const override { return "GatherParallel(output Partial -> Replicate)"; }
  void apply(nn::Module& module, const ApplyContext& context) const override;
};

class IsolatedParallel : public Style {
 public:
  std::string describe() const override { return "IsolatedParallel(local, no communication)"; }
  void apply(nn::Module& module, const ApplyContext& context) const override;
};

namespace detail {
// Records every parameter of module and its descendants as replicated.
void record_replicated_subtree(nn::Module& module, const ApplyContext& ctx, const std::string& style);
// all_reduce_parameter_grads on module and every descendant tessel module.
void all_reduce_parameter_grads_subtree(nn::Module& module, const dist::CommunicatorPtr& group);
}  // namespace detail

}  // namespace tessel::parallel
