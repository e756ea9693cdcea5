// Rotary embedding of float32 heads as one autograd node with a hand-written
// backward, for apply_rotary.
//
// Why: x * cos + rotate_half(x) * sin as ATen ops makes five temporaries of
// x's size (two halves negated and concatenated, two products, a sum) and
// autograd's backward about as many again. Per row of head_dim D, with
// halves x1 = x[:D/2], x2 = x[D/2:] and c, s the row's cos/sin:
//   y1 = x1 * c1 - x2 * s1          dx1 = dy1 * c1 + dy2 * s2
//   y2 = x2 * c2 + x1 * s2          dx2 = dy2 * c2 - dy1 * s1
// (the backward is the rotation by -angle). cos and sin are constants (no
// gradient): they come from position ids.
#pragma once

#include <ATen/core/Tensor.h>

namespace tessel::nn {

// True when rotary_fp32 takes these inputs: x float32 [B, heads, T, D] with
// a contiguous last dim (any strides otherwise: the transposed projections),
// cos/sin contiguous float32 [B, T, D] or [T, D].
bool rotary_fp32_applies(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// x * cos + rotate_half(x) * sin, contiguous [B, heads, T, D]; differentiable in x.
at::Tensor rotary_fp32(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace tessel::nn
