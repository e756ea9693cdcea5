#include "parallel/prepare_module.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "parallel/activation_tags.h"
#include "tensor/autograd_collectives.h"
#include "tensor/redistribute.h"

namespace tessel::parallel {

using tensor::Layout;

namespace {

std::string layouts_string(const Layouts& ls) {
  std::string s = "(";
  for (std::size_t i = 0; i < ls.size(); ++i) s += (i ? ", " : "") + (ls[i] ? ls[i]->to_string() : std::string("-"));
  return s + ")";
}

void check_same_length(const Layouts& a, const Layouts& b, const char* what) {
  TESSEL_CHECK(a.size() == b.size(), "{}: {} layouts given but {} desired; give one (or none) per position", what,
               a.size(), b.size());
}

nn::Tensors redistribute_all(nn::Tensors xs, const Layouts& from, const Layouts& to, const dist::CommunicatorPtr& g,
                             bool local, const char* what, const nn::Module& m) {
  TESSEL_CHECK(xs.size() >= from.size(), "{} on '{}': layouts for {} positions but the module got {}", what,
               m.path(), from.size(), xs.size());
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (!from[i] || !to[i] || !xs[i].defined()) continue;
    xs[i] = detail::redistribute_activation(xs[i], *from[i], *to[i], g, local);
  }
  return xs;
}

}  // namespace

namespace detail {

at::Tensor redistribute_activation(const at::Tensor& x, const Layout& declared, const Layout& to_layout,
                                   const dist::CommunicatorPtr& group, bool use_local_output) {
  auto tag = activation_tag(x);
  const Layout from = (tag ? tag->layout : declared).normalized(x.dim());
  const Layout to = to_layout.normalized(x.dim());
  if (from == to) {
    // A replicated input kept distributed (use_local_output false): one
    // all-reduce of its gradient here, in backward, and column-parallel
    // consumers skip theirs (activation_tags.h), so q/k/v cost one
    // all-reduce instead of three.
    if (!to.is_replicate() || use_local_output || (tag && tag->grad_reduced_by_producer)) return x;
    at::Tensor y = tensor::copy_to_group(x, group);
    tag_activation(y, ActivationTag{Layout::replicate(), -1, true});
    return y;
  }
  std::optional<int64_t> global;
  std::vector<int64_t> sizes;  // of a shard: asked once (an untagged shard costs a tiny all-gather)
  if (from.is_shard()) {
    sizes = shard_sizes(x, from.dim(), group);
    int64_t n = 0;
    for (int64_t s : sizes) n += s;
    global = n;
  } else if (to.is_shard()) {
    global = x.size(to.dim());
  }
  if (from.is_shard() && to.is_replicate()) {
    if (use_local_output) return tensor::all_gather_along(x, from.dim(), group, sizes);
    at::Tensor y = tensor::all_gather_along_reduce_grad(x, from.dim(), group, sizes);
    tag_activation(y, ActivationTag{Layout::replicate(), -1, true});
    return y;
  }
  at::Tensor y = tensor::redistribute(x, from, to, group, global);
  if (to.is_shard()) tag_activation(y, ActivationTag{to, global.value_or(-1), false});
  return y;
}

}  // namespace detail

PrepareModuleInput::PrepareModuleInput(Layouts input_layouts, Layouts desired_input_layouts, bool use_local_output)
    : from_(std::move(input_layouts)), to_(std::move(desired_input_layouts)), use_local_output_(use_local_output) {
  check_same_length(from_, to_, "PrepareModuleInput");
}

std::string PrepareModuleInput::describe() const {
  return fmt::format("PrepareModuleInput({} -> {}{})", layouts_string(from_), layouts_string(to_),
                     use_local_output_ ? "" : ", distributed");
}

void PrepareModuleInput::apply(nn::Module& module, const ApplyContext& ctx) const {
  const auto group = ctx.group;
  const Layouts from = from_, to = to_;
  const bool local = use_local_output_;
  module.add_pre_hook([=](nn::Module& m, nn::Tensors inputs) {
    return redistribute_all(std::move(inputs), from, to, group, local, "PrepareModuleInput", m);
  });
}

PrepareModuleOutput::PrepareModuleOutput(Layouts output_layouts, Layouts desired_output_layouts, bool use_local_output)
    : from_(std::move(output_layouts)), to_(std::move(desired_output_layouts)), use_local_output_(use_local_output) {
  check_same_length(from_, to_, "PrepareModuleOutput");
}

std::string PrepareModuleOutput::describe() const {
  return fmt::format("PrepareModuleOutput({} -> {}{})", layouts_string(from_), layouts_string(to_),
                     use_local_output_ ? "" : ", distributed");
}

void PrepareModuleOutput::apply(nn::Module& module, const ApplyContext& ctx) const {
  const auto group = ctx.group;
  const Layouts from = from_, to = to_;
  const bool local = use_local_output_;
  module.add_post_hook([=](nn::Module& m, const nn::Tensors&, nn::Tensors outputs) {
    return redistribute_all(std::move(outputs), from, to, group, local, "PrepareModuleOutput", m);
  });
}

}  // namespace tessel::parallel
