// A loss's metric as the host reads it: a scalar tensor's value in double,
// detached (metrics never carry gradients).
#pragma once

#include <ATen/ATen.h>

namespace tessel::policy {

inline double metric_value(const at::Tensor& x) { return x.detach().to(at::kDouble).item<double>(); }

}  // namespace tessel::policy
