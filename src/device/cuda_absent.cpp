// The CPU build's answer to device/backend.h's CUDA declarations (the CUDA
// build links device/cuda/cuda_backend.cpp instead).
#include "device/backend.h"

namespace tessel::device {

const Backend* cuda_backend() { return nullptr; }

std::string no_cuda_reason() {
  return "this tessel was built without CUDA (build the cuda preset: bash scripts/cuda.sh; "
         "docs/gpu.md)";
}

}  // namespace tessel::device
