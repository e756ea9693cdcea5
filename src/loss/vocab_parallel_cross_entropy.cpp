#include "loss/vocab_parallel_cross_entropy.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"
#include "loss/chunked_softmax.h"

namespace tessel::loss {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Per-token loss [N] from local logits [N, V_local]; labels [N] global ids.
// Row statistics a block of rows at a time (loss/chunked_softmax.h): the
// global max and the sums of exp are all-reduced over the group between the
// passes, and only the per-row log-sum-exp is kept for backward.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& labels,
                            int64_t vocab_offset, int64_t ignore_index,
                            const dist::CommunicatorPtr& group) {
    const int64_t v_local = logits.size(1);
    // Global max for a stable softmax. An empty local slice contributes -inf.
    at::Tensor max = row_max(logits);
    group->all_reduce(max, dist::ReduceOp::Max);
    // Target logit: only the rank owning the label's row contributes.
    const at::Tensor local_label = labels - vocab_offset;
    const at::Tensor owned = labels.ne(ignore_index) & local_label.ge(0) & local_label.lt(v_local);
    const at::Tensor safe_label = at::where(owned, local_label, at::zeros_like(local_label));
    // One all-reduce for both sums: [2, N].
    at::Tensor sums = at::stack({row_sum_exp(logits, max), picked_logits(logits, safe_label, owned)}).contiguous();
    group->all_reduce(sums, dist::ReduceOp::Sum);
    const at::Tensor lse = max + sums[0].log();
    const at::Tensor valid = labels.ne(ignore_index);
    const at::Tensor loss = at::where(valid, lse - sums[1], at::zeros_like(lse));
    ctx->save_for_backward({logits, lse, safe_label, owned, valid});
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &lse = saved[1], &safe_label = saved[2], &owned = saved[3],
                     &valid = saved[4];
    const at::Tensor scale = at::where(valid, grad_outputs[0].to(at::kFloat), at::zeros_like(lse));
    return {softmax_cross_entropy_grad(logits, lse, safe_label, owned, scale), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

LossSum vocab_parallel_cross_entropy_sum(const at::Tensor& local_logits, const at::Tensor& labels,
                                         int64_t vocab_offset, int64_t global_vocab,
                                         const dist::CommunicatorPtr& tp_group,
                                         int64_t ignore_index) {
  TESSEL_CHECK(local_logits.dim() == labels.dim() + 1,
               "vocab_parallel_cross_entropy: logits of rank {} need labels of rank {}",
               local_logits.dim(), local_logits.dim() - 1);
  const int64_t v_local = local_logits.size(-1);
  TESSEL_CHECK(vocab_offset >= 0 && vocab_offset + v_local <= global_vocab,
               "vocab_parallel_cross_entropy: local slice [{}, {}) exceeds vocabulary {}",
               vocab_offset, vocab_offset + v_local, global_vocab);
  at::Tensor flat_labels = labels.reshape({-1}).to(at::kLong);
  if (flat_labels.is_cpu()) {
    check_labels_in_vocabulary(flat_labels, global_vocab, ignore_index, "vocab_parallel_cross_entropy");
  }
  at::Tensor per_token = VocabParallelCrossEntropy::apply(
      local_logits.reshape({flat_labels.numel(), v_local}), flat_labels, vocab_offset, ignore_index, tp_group);
  return {per_token.sum(), flat_labels.ne(ignore_index).sum()};
}

}  // namespace tessel::loss
