#include "loss/cross_entropy.h"

#include <ATen/ATen.h>

#include "core/error.h"

namespace tessel::loss {

LossSum cross_entropy_sum(const at::Tensor& logits, const at::Tensor& labels,
                          int64_t ignore_index) {
  TESSEL_CHECK(logits.dim() >= 1 && labels.dim() == logits.dim() - 1,
               "cross_entropy: logits of rank {} need labels of rank {}, got rank {}",
               logits.dim(), logits.dim() - 1, labels.dim());
  const int64_t vocab = logits.size(-1);
  at::Tensor flat_logits = logits.reshape({-1, vocab}).to(at::kFloat);
  at::Tensor flat_labels = labels.reshape({-1}).to(at::kLong);
  const int64_t num_valid = count_valid_labels(flat_labels, vocab, ignore_index);
  // Sum reduction: positions with ignore_index contribute zero loss and zero grad.
  at::Tensor sum = at::nll_loss(at::log_softmax(flat_logits, -1), flat_labels, {},
                                at::Reduction::Sum, ignore_index);
  return {sum, num_valid};
}

int64_t count_valid_labels(const at::Tensor& flat_labels, int64_t vocab, int64_t ignore_index) {
  at::Tensor valid = flat_labels.ne(ignore_index);
  const int64_t num_valid = valid.sum().item<int64_t>();
  if (num_valid > 0) {
    at::Tensor valid_labels = flat_labels.masked_select(valid);
    const int64_t lo = valid_labels.min().item<int64_t>(), hi = valid_labels.max().item<int64_t>();
    TESSEL_CHECK(lo >= 0 && hi < vocab,
                 "cross_entropy: label {} is outside the vocabulary [0, {}) (use {} to ignore a "
                 "position)", lo < 0 ? lo : hi, vocab, ignore_index);
  }
  return num_valid;
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
