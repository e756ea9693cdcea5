#include "nn/rms_norm_kernel.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace tessel::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per parallel chunk: enough work per task to amortise scheduling.
constexpr int64_t kRowGrain = 16;

// Σ a[i] * b[i] over n floats: 16 float lanes (independent, so the compiler
// vectorises them without reassociating one sum) combined in double.
double dot(const float* a, const float* b, int64_t n) {
  constexpr int kLanes = 16;
  float lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] += a[i + l] * b[i + l];
  }
  double sum = 0;
  for (int l = 0; l < kLanes; ++l) sum += lane[l];
  for (; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return sum;
}

// w' = w or 1 + w, in float32 as the ATen composition forms it.
std::vector<float> effective_weight(const at::Tensor& weight, bool offset) {
  const float* w = weight.data_ptr<float>();
  std::vector<float> out(w, w + weight.numel());
  if (offset) {
    for (float& x : out) x += 1.0f;
  }
  return out;
}

struct RmsNormFunction : torch::autograd::Function<RmsNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, double eps,
                            bool offset) {
    const int64_t dim = x.size(-1), rows = x.numel() / dim;
    at::Tensor y = at::empty_like(x);
    at::Tensor rstd = at::empty({rows}, x.options());
    const std::vector<float> w = effective_weight(weight, offset);
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    float* rp = rstd.data_ptr<float>();
    at::parallel_for(0, rows, kRowGrain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* xr = xp + r * dim;
        const double sum_sq = dot(xr, xr, dim);
        const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps));
        rp[r] = inv;
        float* yr = yp + r * dim;
        for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] * inv) * w[static_cast<std::size_t>(i)];
      }
    });
    ctx->save_for_backward({x, weight, rstd});
    ctx->saved_data["offset"] = offset;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &rstd = saved[2];
    const at::Tensor dy = grads[0].contiguous();
    const int64_t dim = x.size(-1), rows = x.numel() / dim;
    const std::vector<float> w = effective_weight(weight, ctx->saved_data["offset"].toBool());
    at::Tensor dx = at::empty_like(x);
    const float* xp = x.data_ptr<float>();
    const float* dyp = dy.data_ptr<float>();
    const float* rp = rstd.data_ptr<float>();
    float* dxp = dx.data_ptr<float>();
    at::parallel_for(0, rows, kRowGrain, [&](int64_t begin, int64_t end) {
      std::vector<float> g(static_cast<std::size_t>(dim));  // dy * w' of one row
      for (int64_t r = begin; r < end; ++r) {
        const float* xr = xp + r * dim;
        const float* dyr = dyp + r * dim;
        const float inv = rp[r];
        for (int64_t i = 0; i < dim; ++i) g[static_cast<std::size_t>(i)] = dyr[i] * w[static_cast<std::size_t>(i)];
        // mean(dy * w' * x̂) = r * Σ (dy * w') x / dim
        const float mean = static_cast<float>(inv * dot(g.data(), xr, dim) / static_cast<double>(dim));
        float* dxr = dxp + r * dim;
        for (int64_t i = 0; i < dim; ++i) dxr[i] = inv * (g[static_cast<std::size_t>(i)] - (xr[i] * inv) * mean);
      }
    });
    // dw sums dy * x̂ over rows: float partial sums over blocks of rows (an
    // elementwise loop the compiler vectorises), blocks added in double.
    constexpr int64_t kRowsPerPartial = 64;
    std::vector<double> dw_sum(static_cast<std::size_t>(dim), 0.0);
    std::vector<float> partial(static_cast<std::size_t>(dim));
    for (int64_t r0 = 0; r0 < rows; r0 += kRowsPerPartial) {
      std::fill(partial.begin(), partial.end(), 0.0f);
      for (int64_t r = r0; r < std::min(rows, r0 + kRowsPerPartial); ++r) {
        const float* xr = xp + r * dim;
        const float* dyr = dyp + r * dim;
        const float inv = rp[r];
        for (int64_t i = 0; i < dim; ++i) partial[static_cast<std::size_t>(i)] += dyr[i] * (xr[i] * inv);
      }
      for (int64_t i = 0; i < dim; ++i) dw_sum[static_cast<std::size_t>(i)] += partial[static_cast<std::size_t>(i)];
    }
    at::Tensor dw = at::empty_like(weight);
    float* dwp = dw.data_ptr<float>();
    for (int64_t i = 0; i < dim; ++i) dwp[i] = static_cast<float>(dw_sum[static_cast<std::size_t>(i)]);
    return {dx, dw, {}, {}};
  }
};

}  // namespace

bool rms_norm_fp32_applies(const at::Tensor& x, const at::Tensor& weight) {
  return x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat && x.is_contiguous() &&
         weight.is_contiguous() && x.dim() >= 1 && weight.dim() == 1 && x.size(-1) == weight.size(0) &&
         x.device().is_cpu() && x.numel() > 0;
}

at::Tensor rms_norm_fp32(const at::Tensor& x, const at::Tensor& weight, double eps, bool weight_is_offset) {
  TESSEL_CHECK(rms_norm_fp32_applies(x, weight), "rms_norm_fp32: needs contiguous float32 x [..., {}] and weight [{}]",
               weight.numel(), x.size(-1));
  return RmsNormFunction::apply(x, weight, eps, weight_is_offset);
}

}  // namespace tessel::nn
