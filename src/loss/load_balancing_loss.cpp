#include "loss/load_balancing_loss.h"

#include <ATen/ATen.h>

#include "core/error.h"

namespace tessel::loss {

at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t num_experts, int64_t top_k,
                               const at::Tensor& token_mask) {
  if (router_logits.empty()) return at::zeros({}, at::kFloat);
  TESSEL_CHECK(top_k >= 1 && top_k <= num_experts, "load_balancing_loss: top_k {} must be in [1, num_experts {}]",
               top_k, num_experts);
  const int64_t tokens = router_logits.front().size(0);
  for (const auto& l : router_logits) {
    TESSEL_CHECK(l.dim() == 2 && l.size(0) == tokens && l.size(1) == num_experts,
                 "load_balancing_loss: router logits must be [{}, {}] in every layer, got {} dims of {} elements",
                 tokens, num_experts, l.dim(), l.numel());
  }
  const int64_t layers = static_cast<int64_t>(router_logits.size());
  const at::Tensor all = at::cat(router_logits, 0);  // [L*N, E]
  const at::Tensor probs = at::softmax(all, -1);
  const at::Tensor chosen = std::get<1>(at::topk(probs, top_k, -1));           // [L*N, k]
  const at::Tensor hits = at::one_hot(chosen, num_experts).to(probs.scalar_type());  // [L*N, k, E]

  // Row weights: 1 for a real token, 0 for padding (the same mask in every layer).
  at::Tensor rows = at::ones({layers * tokens}, probs.options());
  if (token_mask.defined()) {
    TESSEL_CHECK(token_mask.numel() == tokens, "load_balancing_loss: token mask has {} entries for {} tokens",
                 token_mask.numel(), tokens);
    rows = token_mask.reshape({1, tokens}).ne(0).to(probs.scalar_type()).expand({layers, tokens}).reshape({-1});
  }
  const at::Tensor count = rows.sum().clamp_min(1);
  const at::Tensor share = (hits * rows.view({-1, 1, 1})).sum(0) / count;   // f [k, E]
  const at::Tensor mean_prob = (probs * rows.view({-1, 1})).sum(0) / count;  // P [E]
  return (share * mean_prob.unsqueeze(0)).sum() * static_cast<double>(num_experts);
}

}  // namespace tessel::loss
