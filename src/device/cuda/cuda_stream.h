// The CUDA stream behind a device::Stream of the CUDA backend, for code that
// issues work onto it itself (NCCL's collectives, dist/cuda/).
#pragma once

#include <cuda_runtime_api.h>

#include "device/stream_ops.h"

namespace tessel::device {

// tessel::Error for a stream of another backend.
cudaStream_t cuda_stream(const Stream& stream);

}  // namespace tessel::device
