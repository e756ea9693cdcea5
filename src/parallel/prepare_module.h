// PrepareModuleInput / PrepareModuleOutput: redistribute a module's inputs
// (before forward) or outputs (after) from the layouts they arrive in to the
// layouts wanted, position by position; a position with no layout (nullopt)
// is passed through (e.g. the rotary cos/sin of an attention module).
//
// use_local_output = false (the default for inputs, as in torch) gathers
// shards into a "distributed" Replicate: the all-gather's backward
// reduce-scatters, and the column-parallel consumers skip their own all-reduce
// (activation_tags.h). Only parallel styles may consume such a tensor. With
// use_local_output = true the result is a plain replicated tensor any code can
// use (backward keeps the local slice of a replicated gradient).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "parallel/style.h"
#include "tensor/layout.h"

namespace tessel::parallel {

using Layouts = std::vector<std::optional<tensor::Layout>>;

class PrepareModuleInput : public Style {
 public:
  PrepareModuleInput(Layouts input_layouts, Layouts desired_input_layouts, bool use_local_output = false);
  std::string describe() const override;
  void apply(nn::Module& module, const ApplyContext& context) const override;

 private:
  Layouts from_, to_;
  bool use_local_output_;
};

class PrepareModuleOutput : public Style {
 public:
  PrepareModuleOutput(Layouts output_layouts, Layouts desired_output_layouts, bool use_local_output = true);
  std::string describe() const override;
  void apply(nn::Module& module, const ApplyContext& context) const override;

 private:
  Layouts from_, to_;
  bool use_local_output_;
};

namespace detail {
// One activation from `declared` (or its tag) to `to`.
at::Tensor redistribute_activation(const at::Tensor& x, const tensor::Layout& declared, const tensor::Layout& to,
                                   const dist::CommunicatorPtr& group, bool use_local_output);
}  // namespace detail

}  // namespace tessel::parallel
