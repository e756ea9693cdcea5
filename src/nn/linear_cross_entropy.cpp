#include "nn/linear_cross_entropy.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "nn/format.h"
#include "nn/onednn_sgemm.h"

namespace tessel::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// a · b through oneDNN's sgemm where the linear layers use it (float32 on
// the CPU), else ATen's (a device, another dtype).
at::Tensor product(const at::Tensor& a, const at::Tensor& b) {
  if (onednn_sgemm_preferred() && onednn_mm_applies(a, b)) return onednn_mm(a, b);
  return at::mm(a, b);
}

int64_t columns_per_block(int64_t rows, int64_t vocab, int64_t requested) {
  if (requested > 0) return std::min(requested, vocab);
  const int64_t fit = kLinearCrossEntropyBlockBytes / (static_cast<int64_t>(sizeof(float)) * std::max<int64_t>(rows, 1));
  return std::clamp<int64_t>(fit, 1, vocab);
}

// What the logits are computed in: float32, or float64 for float64 inputs.
at::ScalarType accumulate_type(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// The logits of the block of `weight` rows [begin, begin + count) for every
// row of hidden, after the cap and the temperature, in accumulate_type.
at::Tensor block_logits(const at::Tensor& hidden, const at::Tensor& weight, int64_t begin, int64_t count,
                        double cap, double temperature) {
  at::Tensor z = product(hidden, weight.narrow(0, begin, count).t()).to(accumulate_type(hidden));
  if (cap > 0) z.div_(cap).tanh_().mul_(cap);
  if (temperature != 1.0) z.div_(temperature);
  return z;
}

// Which rows' labels fall in the block [begin, begin + count), and where.
struct LabelsInBlock {
  at::Tensor in_block;  // [N] bool
  at::Tensor column;    // [N, 1] int64, the label's column in the block (clamped elsewhere)
};

LabelsInBlock labels_in_block(const at::Tensor& label, const at::Tensor& valid, int64_t begin, int64_t count) {
  return {valid.logical_and(label.ge(begin)).logical_and(label.lt(begin + count)),
          (label - begin).clamp(0, count - 1).unsqueeze(1)};
}

// Inputs {hidden [N, H], weight [V, H]}; labels [N] int64 with every valid
// one in [0, V) (checked by the caller), 0 where invalid; valid [N] bool.
// cap <= 0: none; temperature > 0.
struct LinearCrossEntropyFunction : torch::autograd::Function<LinearCrossEntropyFunction> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList inputs, const at::Tensor& label,
                            const at::Tensor& valid, double cap, double temperature, int64_t block) {
    const at::Tensor &hidden = inputs[0], &weight = inputs[1];
    const int64_t rows = hidden.size(0), vocab = weight.size(0);
    const auto f32 = hidden.options().dtype(accumulate_type(hidden));
    at::Tensor max = at::full({rows}, -std::numeric_limits<float>::infinity(), f32);
    at::Tensor sum_exp = at::zeros({rows}, f32);
    at::Tensor picked = at::zeros({rows}, f32);
    for (int64_t begin = 0; begin < vocab; begin += block) {
      const int64_t count = std::min(block, vocab - begin);
      const at::Tensor z = block_logits(hidden, weight, begin, count, cap, temperature);
      // The running log-sum-exp: rescale what was summed to the new maximum.
      const at::Tensor new_max = at::maximum(max, std::get<0>(z.max(1)));
      sum_exp.mul_((max - new_max).exp_()).add_((z - new_max.unsqueeze(1)).exp_().sum(1));
      max = new_max;
      const LabelsInBlock target = labels_in_block(label, valid, begin, count);
      picked.add_(at::where(target.in_block, z.gather(1, target.column).squeeze(1), at::zeros_like(picked)));
    }
    const at::Tensor lse = max + sum_exp.log_();
    ctx->save_for_backward({hidden, weight, lse, label, valid});
    ctx->saved_data["cap"] = cap;
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["block"] = block;
    return at::where(valid, lse - picked, at::zeros_like(lse));  // per row, in the accumulate type
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &hidden = saved[0], &weight = saved[1], &lse = saved[2], &label = saved[3],
                     &valid = saved[4];
    const double cap = ctx->saved_data["cap"].toDouble();
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const int64_t block = ctx->saved_data["block"].toInt();
    const bool want_hidden = ctx->needs_input_grad(0), want_weight = ctx->needs_input_grad(1);
    const int64_t rows = hidden.size(0), vocab = weight.size(0);
    // d(row i's loss)/d z[i, j] = g_i * (softmax_ij - [j == label_i]) on valid
    // rows; through z = c / T, 1 / T more, carried by the per-row scale.
    const at::ScalarType acc = accumulate_type(hidden);
    const at::Tensor scale = valid.to(acc).mul_(grads[0].to(acc)).div_(temperature).unsqueeze(1);
    at::Tensor grad_hidden = want_hidden ? at::zeros({rows, hidden.size(1)}, hidden.options().dtype(acc))
                                         : at::Tensor();
    at::Tensor grad_weight = want_weight ? at::empty_like(weight) : at::Tensor();
    for (int64_t begin = 0; begin < vocab; begin += block) {
      const int64_t count = std::min(block, vocab - begin);
      const at::Tensor z = block_logits(hidden, weight, begin, count, cap, temperature);
      at::Tensor d = (z - lse.unsqueeze(1)).exp_();
      const LabelsInBlock target = labels_in_block(label, valid, begin, count);
      d.scatter_add_(1, target.column, target.in_block.to(acc).neg_().unsqueeze(1));
      d.mul_(scale);
      // Through the cap: d(cap * tanh(x / cap))/dx = 1 - tanh(x / cap)^2,
      // where tanh(x / cap) = z * T / cap.
      if (cap > 0) d.mul_(1.0 - (z * (temperature / cap)).square_());
      const at::Tensor d_in = d.to(hidden.scalar_type());
      if (want_weight) grad_weight.narrow(0, begin, count).copy_(product(d_in.t(), hidden));
      if (want_hidden) grad_hidden.add_(product(d_in, weight.narrow(0, begin, count)));
    }
    if (want_hidden) grad_hidden = grad_hidden.to(hidden.scalar_type());
    return {grad_hidden, grad_weight, {}, {}, {}, {}, {}};
  }
};

}  // namespace

at::Tensor linear_cross_entropy_rows(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                                     int64_t ignore_index, std::optional<double> softcap, double temperature,
                                     int64_t block_columns) {
  TESSEL_CHECK(hidden.dim() >= 1 && weight.dim() == 2 && hidden.size(-1) == weight.size(1) && weight.size(0) > 0,
               "linear_cross_entropy: needs hidden [..., H] and weight [V, H] with V > 0, got {} and {}",
               shape_string(hidden.sizes()), shape_string(weight.sizes()));
  TESSEL_CHECK(labels.dim() == hidden.dim() - 1 && labels.sizes() == hidden.sizes().slice(0, hidden.dim() - 1),
               "linear_cross_entropy: labels {} do not match hidden {}", shape_string(labels.sizes()),
               shape_string(hidden.sizes()));
  TESSEL_CHECK(!softcap || *softcap > 0, "linear_cross_entropy: a softcap must be positive, got {}",
               softcap.value_or(0.0));
  TESSEL_CHECK(temperature > 0 && std::isfinite(temperature),
               "linear_cross_entropy: the temperature must be positive and finite, got {}", temperature);
  const int64_t vocab = weight.size(0);
  const at::Tensor flat = labels.reshape({-1}).to(at::kLong);
  const at::Tensor valid = flat.ne(ignore_index);
  // Reading device labels would wait for the device's queue: the training
  // step checks its batches on the host before they move
  // (loss::check_labels_in_vocabulary, which this layer does not link).
  if (flat.is_cpu() && valid.any().item<bool>()) {
    const at::Tensor targets = flat.masked_select(valid);
    const int64_t lo = targets.min().item<int64_t>(), hi = targets.max().item<int64_t>();
    TESSEL_CHECK(lo >= 0 && hi < vocab,
                 "linear_cross_entropy: label {} is outside the vocabulary [0, {}) (use {} to ignore a position)",
                 lo < 0 ? lo : hi, vocab, ignore_index);
  }
  const at::Tensor rows = hidden.reshape({flat.numel(), hidden.size(-1)});
  const int64_t block = columns_per_block(rows.size(0), vocab, block_columns);
  return LinearCrossEntropyFunction::apply(at::TensorList{rows, weight}, at::where(valid, flat, at::zeros_like(flat)),
                                           valid, softcap.value_or(0.0), temperature, block)
      .view(labels.sizes());
}

at::Tensor linear_cross_entropy_sum(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& labels,
                                    int64_t ignore_index, std::optional<double> softcap, double temperature,
                                    int64_t block_columns) {
  return linear_cross_entropy_rows(hidden, weight, labels, ignore_index, softcap, temperature, block_columns).sum();
}

}  // namespace tessel::nn
