#include "policy/token_logprobs.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "core/error.h"
#include "nn/format.h"
#include "loss/chunked_softmax.h"

namespace tessel::policy {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// fn(begin, len) over consecutive blocks of rows of logits [N, V].
template <typename Fn>
void for_each_block(const at::Tensor& logits, Fn&& fn) {
  const int64_t n = logits.size(0), step = loss::rows_per_chunk(logits.size(1), logits.device());
  for (int64_t begin = 0; begin < n; begin += step) fn(begin, std::min(step, n - begin));
}

// The rows [begin, begin + len) of logits / temperature: the logits' own rows
// at temperature 1 (no copy), else one float32 block.
at::Tensor scaled_rows(const at::Tensor& logits, int64_t begin, int64_t len, double temperature) {
  const at::Tensor rows = logits.narrow(0, begin, len);
  if (temperature == 1.0) return rows;
  return at::div(rows.to(at::kFloat), temperature);  // a new block: .to() returns float32 rows as they are
}

bool sliced(const dist::CommunicatorPtr& group) { return group != nullptr && group->size() > 1; }

// Per-token log-probs [N] from logits [N, V_local]: two passes over blocks of
// rows (max; sum of exponentials and the target's logit), each followed by an
// all-reduce over the slice group when the vocabulary is split.
struct TokenLogprobs : torch::autograd::Function<TokenLogprobs> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& targets,
                            double temperature, int64_t offset, const dist::CommunicatorPtr& group) {
    const int64_t n = logits.size(0), v_local = logits.size(1);
    const at::Tensor local = targets - offset;
    const at::Tensor owned = targets.ge(0) & local.ge(0) & local.lt(v_local);
    const at::Tensor column = at::where(owned, local, at::zeros_like(local));
    const auto float_options = logits.options().dtype(at::kFloat);
    at::Tensor max = at::empty({n}, float_options);
    for_each_block(logits, [&](int64_t begin, int64_t len) {
      max.narrow(0, begin, len).copy_(loss::row_max(scaled_rows(logits, begin, len, temperature).contiguous()));
    });
    if (sliced(group)) group->all_reduce(max, dist::ReduceOp::Max);
    at::Tensor sums = at::zeros({2, n}, float_options);  // [sum of exponentials; target logit]
    for_each_block(logits, [&](int64_t begin, int64_t len) {
      const at::Tensor rows = scaled_rows(logits, begin, len, temperature).contiguous();
      sums[0].narrow(0, begin, len).copy_(loss::row_sum_exp(rows, max.narrow(0, begin, len)));
      sums[1].narrow(0, begin, len)
          .copy_(loss::picked_logits(rows, column.narrow(0, begin, len), owned.narrow(0, begin, len)));
    });
    if (sliced(group)) group->all_reduce(sums, dist::ReduceOp::Sum);
    const at::Tensor lse = max + sums[0].log();
    const at::Tensor has_target = targets.ge(0);
    ctx->save_for_backward({logits, lse, column, owned, has_target});
    ctx->saved_data["temperature"] = temperature;
    return at::where(has_target, sums[1] - lse, at::zeros_like(lse));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &lse = saved[1], &column = saved[2], &owned = saved[3],
                     &has_target = saved[4];
    const double temperature = ctx->saved_data["temperature"].toDouble();
    // d log p / d x = (onehot - softmax(x / T)) / T: the cross-entropy
    // gradient with the incoming gradient negated and divided by T.
    const at::Tensor scale =
        at::where(has_target, grads[0].to(at::kFloat) * (-1.0 / temperature), at::zeros_like(lse));
    at::Tensor grad;
    if (temperature == 1.0) {
      grad = loss::softmax_cross_entropy_grad(logits, lse, column, owned, scale);
    } else {
      grad = at::empty(logits.sizes(), logits.options());
      for_each_block(logits, [&](int64_t begin, int64_t len) {
        const at::Tensor rows = scaled_rows(logits, begin, len, temperature).contiguous();
        grad.narrow(0, begin, len)
            .copy_(loss::softmax_cross_entropy_grad(rows, lse.narrow(0, begin, len), column.narrow(0, begin, len),
                                                    owned.narrow(0, begin, len), scale.narrow(0, begin, len)));
      });
    }
    return {grad, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor token_logprobs(const at::Tensor& logits, const at::Tensor& targets, double temperature,
                          const VocabSlice& slice) {
  TESSEL_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0),
               "token_logprobs: needs logits [N, V] and targets [N], got {} and {}", nn::shape_string(logits.sizes()), nn::shape_string(targets.sizes()));
  if (temperature <= 0.0) {
    throw UsageError(fmt::format("the sampling temperature must be > 0, got {}", temperature));
  }
  const int64_t vocab = slice.vocab_size > 0 ? slice.vocab_size : logits.size(1);
  TESSEL_CHECK(slice.offset >= 0 && slice.offset + logits.size(1) <= vocab,
               "token_logprobs: local columns [{}, {}) exceed the vocabulary {}", slice.offset,
               slice.offset + logits.size(1), vocab);
  TESSEL_CHECK(sliced(slice.group) || logits.size(1) == vocab,
               "token_logprobs: logits hold {} of {} vocabulary columns but no group holds the rest", logits.size(1),
               vocab);
  const at::Tensor ids = targets.to(at::kLong);
  // Device targets are not read here (that would wait for the device's
  // queue): batches are checked on the host before they move (train_step,
  // get_logprobs).
  const at::Tensor real = ids.is_cpu() ? ids.masked_select(ids.ge(0)) : at::Tensor();
  if (real.defined() && real.numel() > 0) {
    const int64_t hi = real.max().item<int64_t>();
    TESSEL_CHECK(hi < vocab, "token_logprobs: token id {} is outside the vocabulary [0, {})", hi, vocab);
  }
  return TokenLogprobs::apply(logits, ids, temperature, slice.offset, slice.group);
}

}  // namespace tessel::policy
