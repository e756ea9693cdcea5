// Gradients laid out as their inputs were. A custom autograd function whose
// input is a transposed view ([B, T, heads, D] memory read as [B, heads, T,
// D]) and whose gradient comes back contiguous in the viewed shape makes the
// transpose's backward hand the projection before it a non-contiguous
// gradient, which the reshape back to [B, T, hidden] then copies: one extra
// pass per tensor per layer. Allocating the gradient in the input's own
// layout (at::empty_strided with dense_layout of the input) makes that
// reshape a view.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace tessel::nn {

// The strides of `t` when it is dense (a permutation of a contiguous
// layout), else those of a contiguous tensor of its shape.
std::vector<int64_t> dense_layout(const at::Tensor& t);

}  // namespace tessel::nn
