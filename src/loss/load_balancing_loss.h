// The load-balancing auxiliary loss of mixture-of-experts models, as HF's
// load_balancing_loss_func computes it (Switch Transformer, eqs. 4-6): the
// router logits of all MoE layers are concatenated along the token dimension
// ([L*N, E]); with p = softmax(logits) and the top-k experts of each row,
//   f[k, e] = share of rows whose k-th choice is e,  P[e] = mean p[:, e],
//   aux = E * sum_{k, e} f[k, e] * P[e].
// f carries no gradient (argmax); the router learns through P. With a token
// mask (1 = real token), padding rows are left out of both means.
//
// [Note: the aux loss in tessel's training step] HF adds
// router_aux_loss_coef * aux to the loss of each forward when the config's
// output_router_logits is true, and not otherwise. tessel does the same per
// micro batch: the trainer asks the model for its router logits
// (CausalLM::forward_with_router_logits), computes aux over that micro
// batch's real tokens and optimises
//   loss = CE (mean over the global batch's target tokens)
//        + router_aux_loss_coef * mean over the global batch's micro batches of aux,
// which is what HF's gradient accumulation over ranks and micro batches
// averages. Micro batches are the same rows whatever the dp layout
// (data::DistributedSampler cuts each rank's consecutive block of the global
// batch), so the aux term, like the CE term, does not depend on the layout.
// The reported training loss includes it; the validation loss is CE only.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace tessel::loss {

// router_logits: one [N, E] tensor per MoE layer (N = B*T tokens, the same
// in every layer); token_mask: optional [B, T] (B*T = N), nonzero = a real
// token. Returns the differentiable scalar aux (not scaled by any
// coefficient), in the logits' dtype. With no layers it is 0; a mask with no
// real token gives 0 (HF would divide by zero).
at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t num_experts, int64_t top_k,
                               const at::Tensor& token_mask = {});

}  // namespace tessel::loss
