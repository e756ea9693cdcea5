#include "nn/rotary_kernel.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"
#include "nn/gradient_layout.h"

namespace tessel::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One row of D = 2 * half: y = x * cos + rotate_half(x) * sin (direction
// -1: sin negated). The buffers are distinct (out is fresh), which lets the
// loop vectorise without run-time overlap checks; the file is built with
// GCC's full vectoriser cost model (CMakeLists.txt).
void rotate_row(const float* __restrict x, const float* __restrict c, const float* __restrict s,
                float* __restrict y, int64_t half, float direction) {
  for (int64_t j = 0; j < half; ++j) {
    const float x1 = x[j], x2 = x[j + half];
    y[j] = x1 * c[j] - direction * (x2 * s[j]);
    y[j + half] = x2 * c[j + half] + direction * (x1 * s[j + half]);
  }
}

// Rotates every row of `in` into `out` (both [B, H, T, D] layouts given by
// their strides, rows contiguous) by the angles of cos/sin. direction +1:
// forward (y from x); -1: backward (dx from dy: the same rotation with sin
// negated).
void rotate_rows(const at::Tensor& in, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& out,
                 float direction) {
  const int64_t B = in.size(0), H = in.size(1), T = in.size(2), D = in.size(3), half = D / 2;
  const int64_t sb = in.stride(0), sh = in.stride(1), st = in.stride(2);
  const int64_t ob = out.stride(0), oh = out.stride(1), ot = out.stride(2);
  const bool per_batch = cos.dim() == 3;  // [B, T, D], else [T, D]
  const float* ip = in.data_ptr<float>();
  const float* cp = cos.data_ptr<float>();
  const float* sp = sin.data_ptr<float>();
  float* op = out.data_ptr<float>();
  // Rows in the order `out` holds them, so its writes run sequentially: a
  // gradient laid out like a transposed view ([B, T, H, D] in memory) is
  // written token by token (head by head it took twice as long).
  const bool token_major = oh < ot;
  const int64_t outer = token_major ? T : H, inner = token_major ? H : T;
  at::parallel_for(0, B * outer, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / outer;
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t h = token_major ? j : i % outer, t = token_major ? i % outer : j;
        const float* x = ip + b * sb + h * sh + t * st;
        const int64_t angle_row = (per_batch ? b * T + t : t) * D;
        const float* c = cp + angle_row;
        const float* s = sp + angle_row;
        float* y = op + b * ob + h * oh + t * ot;
        rotate_row(x, c, s, y, half, direction);
      }
    }
  });
}

struct RotaryFunction : torch::autograd::Function<RotaryFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    at::Tensor y = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
    rotate_rows(x, cos, sin, y, 1.0f);
    ctx->saved_data["x_strides"] = dense_layout(x);  // dx in x's layout (gradient_layout.h)
    ctx->saved_data["cos"] = cos;
    ctx->saved_data["sin"] = sin;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor& dy = grads[0];
    at::Tensor dx = at::empty_strided(dy.sizes(), ctx->saved_data["x_strides"].toIntVector(), dy.options());
    rotate_rows(dy.stride(-1) == 1 ? dy : dy.contiguous(), ctx->saved_data["cos"].toTensor(),
                ctx->saved_data["sin"].toTensor(), dx, -1.0f);
    return {dx, {}, {}};
  }
};

}  // namespace

bool rotary_fp32_applies(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  if (x.dim() != 4 || x.scalar_type() != at::kFloat || x.stride(-1) != 1 || !x.device().is_cpu()) return false;
  const int64_t T = x.size(2), D = x.size(3);
  for (const at::Tensor* a : {&cos, &sin}) {
    if (a->scalar_type() != at::kFloat || !a->is_contiguous() || a->requires_grad()) return false;
    const bool shape_ok = (a->dim() == 2 && a->size(0) == T && a->size(1) == D) ||
                          (a->dim() == 3 && a->size(0) == x.size(0) && a->size(1) == T && a->size(2) == D);
    if (!shape_ok) return false;
  }
  return D % 2 == 0 && cos.sizes() == sin.sizes();
}

at::Tensor rotary_fp32(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  TESSEL_CHECK(rotary_fp32_applies(x, cos, sin),
               "rotary_fp32: needs float32 x [B, heads, T, D] (last dim contiguous) and constant contiguous "
               "float32 cos/sin [B, T, D] or [T, D]");
  return RotaryFunction::apply(x, cos, sin);
}

}  // namespace tessel::nn
