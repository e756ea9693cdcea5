#include "nn/gradient_layout.h"

#include <c10/util/strides.h>

namespace tessel::nn {

std::vector<int64_t> dense_layout(const at::Tensor& t) {
  if (t.is_non_overlapping_and_dense()) return t.strides().vec();
  const c10::DimVector strides = c10::contiguous_strides(t.sizes());
  return {strides.begin(), strides.end()};
}

}  // namespace tessel::nn
