#include "loss/vocab_parallel_cross_entropy.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"

namespace tessel::loss {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Per-token loss [N] from local logits [N, V_local]; labels [N] global ids.
struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& labels,
                            int64_t vocab_offset, int64_t ignore_index,
                            const dist::CommunicatorPtr& group) {
    at::Tensor x = logits.to(at::kFloat);
    const int64_t n = x.size(0), v_local = x.size(1);
    // Global max for a stable softmax. An empty local slice contributes -inf.
    at::Tensor max = v_local > 0 ? std::get<0>(x.max(1)).contiguous()
                                 : at::full({n}, -std::numeric_limits<float>::infinity());
    group->all_reduce(max, dist::ReduceOp::Max);
    at::Tensor shifted = x - max.unsqueeze(1);
    at::Tensor exp = shifted.exp();
    at::Tensor sum_exp = exp.sum(1).contiguous();
    // Target logit: only the rank owning the label's row contributes.
    at::Tensor local_label = labels - vocab_offset;
    at::Tensor owned = labels.ne(ignore_index) & local_label.ge(0) & local_label.lt(v_local);
    at::Tensor safe_label = at::where(owned, local_label, at::zeros_like(local_label));
    at::Tensor target = v_local > 0 ? shifted.gather(1, safe_label.unsqueeze(1)).squeeze(1)
                                    : at::zeros({n});
    target = at::where(owned, target, at::zeros_like(target)).contiguous();
    // One all-reduce for both sums: [2, N].
    at::Tensor sums = at::stack({sum_exp, target}).contiguous();
    group->all_reduce(sums, dist::ReduceOp::Sum);
    at::Tensor log_z = sums[0].log();
    at::Tensor valid = labels.ne(ignore_index);
    at::Tensor loss = at::where(valid, log_z - sums[1], at::zeros_like(log_z));
    // softmax_local = exp / sum_exp_global, kept for backward.
    at::Tensor softmax = exp.div_(sums[0].unsqueeze(1));
    ctx->save_for_backward({softmax, safe_label, owned, valid});
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits.scalar_type());
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    at::Tensor grad = saved[0].clone();  // softmax_local
    const at::Tensor& safe_label = saved[1];
    const at::Tensor& owned = saved[2];
    const at::Tensor& valid = saved[3];
    if (grad.size(1) > 0) {
      grad.scatter_add_(1, safe_label.unsqueeze(1), -owned.to(at::kFloat).unsqueeze(1));
    }
    at::Tensor scale = at::where(valid, grad_outputs[0].to(at::kFloat), at::zeros_like(grad_outputs[0], at::kFloat));
    grad.mul_(scale.unsqueeze(1));
    auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
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
  const int64_t num_valid = count_valid_labels(flat_labels, global_vocab, ignore_index);
  at::Tensor per_token = VocabParallelCrossEntropy::apply(
      local_logits.reshape({flat_labels.numel(), v_local}), flat_labels, vocab_offset, ignore_index, tp_group);
  return {per_token.sum(), num_valid};
}

}  // namespace tessel::loss
