#include "nn/gradient_layout.h"

#include <ATen/ATen.h>

namespace tessel::nn {

std::vector<int64_t> dense_layout(const at::Tensor& t) {
  if (t.is_non_overlapping_and_dense()) return t.strides().vec();
  std::vector<int64_t> strides(t.dim());
  int64_t stride = 1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= std::max<int64_t>(t.size(d), 1);
  }
  return strides;
}

}  // namespace tessel::nn
