#include "core/device_kernel_choice.h"

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace tessel {

bool use_device_kernels(const char* choice, bool built) {
  const std::string value = choice != nullptr ? choice : "";
  if (value.empty() || value == "aten") return false;
  if (value == "fused") {
    if (built) return true;
    throw UsageError(
        "TESSEL_DEVICE_KERNELS=fused, but this tessel has no fused device paths: it was built without CUDA, "
        "or its CUDA build found no working nvcc (build the cuda preset with the CUDA toolkit: "
        "scripts/cuda.sh), or use aten");
  }
  throw UsageError(fmt::format("TESSEL_DEVICE_KERNELS='{}' is unknown; use aten (ATen's compositions, the "
                               "default) or fused (tessel's CUDA kernels and fused AdamW)",
                               value));
}

bool device_kernels_chosen(bool built) { return use_device_kernels(std::getenv("TESSEL_DEVICE_KERNELS"), built); }

}  // namespace tessel
