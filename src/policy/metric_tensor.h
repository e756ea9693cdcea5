// A loss's metric as it is summed over a step's micro batches: a scalar
// tensor detached (metrics never carry gradients), in float64, on the device
// it was computed on. Read on the host once per step
// (train::MetricSums::take); reading each where it is made would wait for a
// device's queue several times per micro batch.
#pragma once

#include <ATen/ATen.h>

namespace tessel::policy {

inline at::Tensor metric_tensor(const at::Tensor& x) { return x.detach().to(at::kDouble); }

}  // namespace tessel::policy
