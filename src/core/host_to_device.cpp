#include "core/host_to_device.h"

#include <ATen/ATen.h>

namespace tessel {

at::Tensor to_device_without_waiting(const at::Tensor& t, c10::Device device) {
  if (!t.defined() || t.device() == device) return t;
  if (t.device().is_cpu() && !device.is_cpu()) {
    return t.pin_memory().to(at::TensorOptions().device(device), /*non_blocking=*/true);
  }
  return t.to(device);
}

}  // namespace tessel
