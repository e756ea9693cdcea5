#include "device/backend.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tessel::device {

int cuda_device_count() {
  const Backend* cuda = cuda_backend();
  return cuda ? cuda->device_count() : 0;
}

const Backend* backend_for(c10::Device device) {
  if (device.is_cpu()) return nullptr;
  if (device.is_cuda()) {
    const Backend* cuda = cuda_backend();
    TESSEL_CHECK(cuda != nullptr, "a tensor on {} but {}", device.str(), no_cuda_reason());
    return cuda;
  }
  throw Error(fmt::format("tessel computes on the CPU or CUDA devices, not on {}", device.str()));
}

void synchronize(c10::Device device) {
  if (const Backend* b = backend_for(device))
    b->synchronize(device.index() < 0 ? 0 : device.index());
}

bool mark_profiler_range(c10::Device device, bool start) {
  const Backend* b = backend_for(device);
  if (b == nullptr) return false;
  synchronize(device);
  if (start) b->start_profiler_range();
  else b->stop_profiler_range();
  return true;
}

}  // namespace tessel::device
