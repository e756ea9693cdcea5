#include "nn/sparse_moe.h"

#include <ATen/ATen.h>

#include <string>

#include "core/error.h"

namespace tessel::nn {

Routing route_tokens(const at::Tensor& router_logits, int64_t top_k, bool normalize_top_k, at::ScalarType dtype) {
  // The probabilities in float32 whatever the activation dtype (as HF).
  const at::Tensor probs = at::softmax(router_logits, -1, at::kFloat);
  auto [weights, chosen] = at::topk(probs, top_k, -1);  // [N, k] each
  if (normalize_top_k) weights = weights / weights.sum(-1, /*keepdim=*/true);
  return {weights.to(dtype), chosen};
}

SparseMoeBlock::SparseMoeBlock(const SparseMoeOptions& o, const at::TensorOptions& t)
    : Module("SparseMoeBlock"), options_(o) {
  TESSEL_CHECK(o.num_experts > 0 && o.top_k > 0 && o.top_k <= o.num_experts,
               "SparseMoeBlock: top_k {} must be in [1, num_experts {}]", o.top_k, o.num_experts);
  // Registration order = HF's: the router, then the experts.
  gate_ = register_module("gate", std::make_shared<Linear>(o.hidden_size, o.num_experts, false, t));
  experts_ = register_module("experts", std::make_shared<ModuleList>());
  for (int64_t e = 0; e < o.num_experts; ++e) {
    experts_->push_back(
        std::make_shared<GatedMLP>(o.hidden_size, o.intermediate_size, o.act, false, t, o.expert_names));
  }
}

void SparseMoeBlock::keep_experts(int64_t first, int64_t count, ExpertDispatch dispatch) {
  TESSEL_CHECK(!dispatch_, "SparseMoeBlock {}: keep_experts was already applied", path());
  TESSEL_CHECK(first >= 0 && count > 0 && first + count <= options_.num_experts,
               "SparseMoeBlock {}: experts [{}, {}) are not within the {} experts", path(), first, first + count,
               options_.num_experts);
  auto kept = std::make_shared<ModuleList>();
  for (int64_t e = first; e < first + count; ++e) {
    kept->push_back((*experts_)[static_cast<std::size_t>(e)], std::to_string(e));
  }
  unregister_module("experts");
  experts_ = register_module("experts", kept);
  first_expert_ = first;
  dispatch_ = std::move(dispatch);
}

Tensors SparseMoeBlock::forward(const Tensors& inputs) {
  TESSEL_CHECK(inputs.size() == 1, "SparseMoeBlock {} takes one input, got {}", path(), inputs.size());
  const at::Tensor& x = inputs[0];
  const int64_t H = x.size(-1), k = options_.top_k, E = options_.num_experts;
  const at::Tensor tokens = x.reshape({-1, H});  // [N, H]
  const at::Tensor router_logits = gate_->call(tokens);  // [N, E]

  const Routing routing = route_tokens(router_logits, k, options_.normalize_top_k, x.scalar_type());
  if (dispatch_) {
    const at::Tensor out = dispatch_(tokens, routing, [this](int64_t local, const at::Tensor& rows) {
      return (*experts_)[static_cast<std::size_t>(local)]->call(rows);
    });
    return {out.view(x.sizes()), router_logits};
  }
  const at::Tensor& weights = routing.weights;
  const at::Tensor& chosen = routing.chosen;

  // Sort the N*k (token, slot) assignments by expert: expert e's tokens are
  // then one contiguous run of `order`. One host sync for the run lengths.
  const at::Tensor flat_expert = chosen.flatten();  // [N*k]
  const at::Tensor order = std::get<1>(at::sort(flat_expert, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  const at::Tensor token_of = at::div(order, k, "floor");  // [N*k] token index per sorted assignment
  const at::Tensor weight_of = weights.flatten().index_select(0, order).unsqueeze(1);  // [N*k, 1]
  const at::Tensor counts = at::bincount(flat_expert, {}, E).to(at::kCPU);
  const auto count = counts.accessor<int64_t, 1>();

  // Added into in place: a new [N, H] tensor per expert would write the
  // whole output E times (autograd needs neither what index_add_ overwrites
  // nor its result).
  at::Tensor out = at::zeros_like(tokens);
  int64_t begin = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = count[e];
    const at::Tensor rows = token_of.narrow(0, begin, n);
    const at::Tensor expert_out = (*experts_)[static_cast<std::size_t>(e)]->call(tokens.index_select(0, rows));
    out.index_add_(0, rows, expert_out * weight_of.narrow(0, begin, n));
    begin += n;
  }
  return {out.view(x.sizes()), router_logits};
}

}  // namespace tessel::nn
