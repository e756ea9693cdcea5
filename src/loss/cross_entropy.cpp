#include "loss/cross_entropy.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>
#include <fmt/format.h>

#include "core/error.h"
#include "loss/chunked_softmax.h"

namespace tessel::loss {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Per-token loss [N] (0 where ignored) from logits [N, V], in float32, a
// block of rows at a time (loss/chunked_softmax.h): only the per-row
// log-sum-exp is kept for backward, beside the logits themselves.
struct CrossEntropyFunction : torch::autograd::Function<CrossEntropyFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& labels,
                            int64_t ignore_index) {
    const at::Tensor valid = labels.ne(ignore_index);
    const at::Tensor column = at::where(valid, labels, at::zeros_like(labels));
    const at::Tensor max = row_max(logits);
    const at::Tensor lse = max + row_sum_exp(logits, max).log_();
    const at::Tensor loss = at::where(valid, lse - picked_logits(logits, column, valid), at::zeros_like(lse));
    ctx->save_for_backward({logits, lse, column, valid});
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &lse = saved[1], &column = saved[2], &valid = saved[3];
    const at::Tensor scale = at::where(valid, grads[0].to(at::kFloat), at::zeros_like(lse));
    return {softmax_cross_entropy_grad(logits, lse, column, valid, scale), {}, {}};
  }
};

}  // namespace

LossSum cross_entropy_sum(const at::Tensor& logits, const at::Tensor& labels,
                          int64_t ignore_index) {
  TESSEL_CHECK(logits.dim() >= 1 && labels.dim() == logits.dim() - 1,
               "cross_entropy: logits of rank {} need labels of rank {}, got rank {}",
               logits.dim(), logits.dim() - 1, labels.dim());
  const int64_t vocab = logits.size(-1);
  at::Tensor flat_labels = labels.reshape({-1}).to(at::kLong);
  if (flat_labels.is_cpu()) check_labels_in_vocabulary(flat_labels, vocab, ignore_index, "cross_entropy");
  // Sum reduction: positions with ignore_index contribute zero loss and zero grad.
  const at::Tensor per_token =
      CrossEntropyFunction::apply(logits.reshape({flat_labels.numel(), vocab}), flat_labels, ignore_index);
  return {per_token.sum(), flat_labels.ne(ignore_index).sum()};
}

void check_labels_in_vocabulary(const at::Tensor& labels, int64_t vocab, int64_t ignore_index, const char* who) {
  const at::Tensor flat = labels.reshape({-1}).to(at::kLong);
  const at::Tensor outside = flat.ne(ignore_index).logical_and(flat.lt(0).logical_or(flat.ge(vocab)));
  if (!outside.any().item<bool>()) return;
  const int64_t label = flat.masked_select(outside)[0].item<int64_t>();
  throw Error(fmt::format("{}: label {} is outside the vocabulary [0, {}) (use {} to ignore a position)", who, label,
                          vocab, ignore_index));
}

at::Tensor next_token_labels(const at::Tensor& tokens, const at::Tensor& loss_mask,
                             int64_t ignore_index) {
  TESSEL_CHECK(tokens.dim() == 2, "next_token_labels: tokens must be [batch, seq], got rank {}",
               tokens.dim());
  at::Tensor labels = at::full_like(tokens, ignore_index, at::kLong);
  const int64_t seq = tokens.size(1);
  if (seq < 2) return labels;
  labels.slice(1, 0, seq - 1).copy_(tokens.slice(1, 1, seq));
  if (loss_mask.defined()) {
    TESSEL_CHECK(loss_mask.sizes() == tokens.sizes(),
                 "next_token_labels: loss_mask shape differs from tokens");
    // The target of position t is token t+1: it counts when token t+1 is a target.
    at::Tensor target_mask = at::zeros_like(tokens, at::kBool);
    target_mask.slice(1, 0, seq - 1).copy_(loss_mask.slice(1, 1, seq).ne(0));
    labels.masked_fill_(target_mask.logical_not(), ignore_index);
  }
  return labels;
}

}  // namespace tessel::loss
